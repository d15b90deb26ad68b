"""The App Home tab: a personal page published whenever a user opens the app's Home tab.

Like the `/sky` commands it is built only from the in-memory snapshot view and the stored
`/sky notify` choice, never from Slurm, and it reuses the commands' own formatting, so the Home
tab and `/sky jobs`, `/sky gpus`, `/sky disk` and `/sky notify` always say the same thing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any, Protocol

from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from core.buttons.cancel import cancel_block
from core.buttons.remove_watch import remove_buttons
from core.gpu_watch import Watch, watch_line
from core.job_facts import job_label
from core.view import ClusterView
from handlers.buttons.cancel import cancelling
from handlers.clicks import BackgroundWork
from handlers.clusters import ClusterDesks
from handlers.commands import command_table
from handlers.commands.common import (
    SOURCE_LABELS,
    NoData,
    ago,
    freshness_lines,
    literal,
    require_data,
)
from handlers.commands.disk import user_lines
from handlers.commands.gpus import lab_lines
from handlers.commands.help import FOOTER, command_lines
from handlers.commands.jobs import active_jobs, jobs_lines
from handlers.commands.notify import CHOICES, current_preference, preference_line
from handlers.commands.watch import USAGE as WATCH_USAGE
from handlers.reply import Block, context, header, lines_to_sections, section
from handlers.router import CommandTable
from handlers.services import Services
from store.reader import SnapshotCache
from store.watches import active_watches_of

log = logging.getLogger(__name__)

# Slack's limit for a Home tab view (messages allow 50).
MAX_HOME_BLOCKS = 100
# Directories listed on the Home tab; `/sky disk` lists more.
MAX_HOME_DIRECTORIES = 5
ERROR_TEXT = (
    "⚠️ skybot could not build your Home tab just now. Reopen it in a moment; "
    "`/sky help` still works."
)

View = dict[str, Any]


def register_listeners(
    app: AsyncApp, cache: SnapshotCache, services: Services, desks: ClusterDesks | None = None
) -> None:
    publish = home_publisher(cache, services, desks)
    working = BackgroundWork()

    @app.event("app_home_opened")
    async def home_opened(
        event: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
    ) -> None:
        if event.get("tab") != "home":
            return  # the Messages tab: nothing to publish
        # Bolt acks the event when this returns; finding out who opened the tab may take a
        # slow users.info, and an event unacked in 3 s is sent again: publish after the ack.
        working.start(publish(client, context.team_id or "", str(event.get("user") or ""), None))


class HomePublisher(Protocol):
    async def __call__(
        self, client: AsyncWebClient, team_id: str, user_id: str, notice: str | None, /
    ) -> None: ...


def home_publisher(
    cache: SnapshotCache, services: Services, desks: ClusterDesks | None = None
) -> HomePublisher:
    """Publishes a user's Home tab from the current snapshot, with `notice` (the outcome of a
    click on the tab: a click there has no response_url to answer through) at its top. With
    several clusters (`desks`), the user's jobs on each, under its name."""
    table = command_table()

    async def publish(
        client: AsyncWebClient, team_id: str, user_id: str, notice: str | None
    ) -> None:
        several = desks is not None and desks.several
        clusters = [(d.name, d.view()) for d in desks.all()] if desks and several else []
        view = await _home_or_error(cache, services, table, team_id, user_id, notice, clusters)
        try:
            await client.views_publish(user_id=user_id, view=view)
        except Exception:
            log.exception("views.publish of the Home tab for %s failed", user_id)

    return publish


async def _home_or_error(
    cache: SnapshotCache,
    services: Services,
    table: CommandTable,
    team_id: str,
    user_id: str,
    notice: str | None = None,
    clusters: Sequence[tuple[str, ClusterView]] = (),
) -> View:
    try:
        return await home_view(
            cache.current(), services, table, team_id, user_id, time.time(), notice, clusters
        )
    except Exception:
        log.exception("building the Home tab for %s failed", user_id)
        return error_view()


async def home_view(
    view: ClusterView,
    services: Services,
    table: CommandTable,
    team_id: str,
    user_id: str,
    now: float,
    notice: str | None = None,
    clusters: Sequence[tuple[str, ClusterView]] = (),
) -> View:
    """The Home tab for one Slack user: their cluster page if linked, else how to link.
    `clusters`: (name, view) of every cluster where there are several, the default first."""
    user = await services.identity.resolve(team_id, user_id)
    if user is None:
        return home(([section(notice)] if notice else []) + unlinked_blocks(table))
    pref, chosen = await current_preference(services, team_id, user_id)
    watches: list[Watch] = []
    if services.writer is not None:
        watches = await services.writer.run(active_watches_of, team_id, user_id)
    going = frozenset(
        (v.cluster_name, job_label(j))
        for v in [view, *(v for _, v in clusters[1:])]
        for j in active_jobs(v, user)
        if cancelling(v, services, j)
    )
    blocks = linked_blocks(view, user, pref, chosen, now, notice, watches, going, clusters)
    return home(blocks)


def home(blocks: list[Block]) -> View:
    return {"type": "home", "blocks": fit(blocks)}


def error_view() -> View:
    return home([section(ERROR_TEXT)])


def fit(blocks: list[Block], limit: int = MAX_HOME_BLOCKS) -> list[Block]:
    """At most `limit` blocks, keeping the last (the data's age) and saying something was cut."""
    if len(blocks) <= limit:
        return blocks
    return [*blocks[: limit - 2], section("… (shortened)"), blocks[-1]]


# ------------------------------------------------------------------------------- linked user


def linked_blocks(
    view: ClusterView,
    user: str,
    pref: str,
    chosen: bool,
    now: float,
    notice: str | None = None,
    watches: Sequence[Watch] = (),
    cancelled: frozenset[tuple[str, str]] = frozenset(),
    clusters: Sequence[tuple[str, ClusterView]] = (),
) -> list[Block]:
    """`cancelled`: (cluster, label) of jobs skybot has just cancelled, which the snapshot may
    still list as running or pending until the next poll (job ids repeat across clusters).
    `clusters`: as `home_view`'s."""
    warnings, _ = freshness_lines(view, now, "slurm", also=("caps", "storage"))
    blocks: list[Block] = [header(f"skybot — {user}"), *(section(w) for w in warnings)]
    if notice:
        blocks.append(section(notice))
    jobs = [
        (
            f"Your jobs on {name}",
            job_part(cluster_view, user, now, _on(cluster_view, cancelled)),
            job_buttons(cluster_view, user, _on(cluster_view, cancelled)),
        )
        for name, cluster_view in clusters
    ] or [
        (
            "Your jobs",
            job_part(view, user, now, _on(view, cancelled)),
            job_buttons(view, user, _on(view, cancelled)),
        )
    ]
    parts: tuple[tuple[str, list[str], list[Block]], ...] = (
        *jobs,
        ("Your lab's GPUs", lab_part(view, user), []),
        ("Your largest directories", disk_part(view, user), []),
        ("Your GPU watches", watch_part(watches, now), remove_buttons(list(watches))),
        ("Job DMs", [preference_part(user, pref, chosen)], []),
    )
    for title, lines, buttons in parts:
        blocks += [{"type": "divider"}, header(title), *lines_to_sections(lines), *buttons]
    blocks.append(context(ages_line(view, now)))
    return blocks


def _on(view: ClusterView, cancelled: frozenset[tuple[str, str]]) -> frozenset[str]:
    """The labels of `cancelled` that are `view`'s cluster's jobs."""
    return frozenset(label for cluster, label in cancelled if cluster == view.cluster_name)


def job_buttons(
    view: ClusterView, user: str, cancelled: frozenset[str] = frozenset()
) -> list[Block]:
    """Cancel, as on `/sky jobs`: the click is checked again (handlers/buttons/cancel.py);
    the buttons name `view`'s cluster."""
    jobs = [j for j in active_jobs(view, user) if job_label(j) not in cancelled]
    return cancel_block(view, jobs)


def job_part(
    view: ClusterView, user: str, now: float, cancelled: frozenset[str] = frozenset()
) -> list[str]:
    try:
        require_data(view, "slurm")
    except NoData as missing:
        return [str(missing)]
    jobs = active_jobs(view, user)
    ending = [j for j in jobs if job_label(j) in cancelled]
    jobs = [j for j in jobs if job_label(j) not in cancelled]
    if not jobs and not ending:
        return [f"You ({literal(user)}) have no running or pending jobs."]
    lines = jobs_lines(user, jobs, now) if jobs else []
    if ending:
        named = ", ".join(f"{literal(job_label(j))} {literal(j.name, 40)}" for j in ending)
        lines.append(f"Cancelled just now, Slurm is ending them: {named}")
    return lines


def lab_part(view: ClusterView, user: str) -> list[str]:
    try:
        require_data(view, "slurm")
    except NoData as missing:
        return [str(missing)]
    labs = view.labs_of_user(user)
    if not labs:
        return ["skybot does not know your lab yet. `/sky gpus LAB` shows any lab's GPUs."]
    lines: list[str] = []
    for lab in labs:
        lines += lab_lines(view, lab, view.usage(lab))
    return lines


def disk_part(view: ClusterView, user: str) -> list[str]:
    try:
        require_data(view, "storage")
    except NoData as missing:
        return [str(missing)]
    lines = user_lines(view, user, asker=True, limit=MAX_HOME_DIRECTORIES)
    return [*lines, "`/sky disk` lists more, `/sky df` shows how full each filesystem is."]


def watch_part(watches: Sequence[Watch], now: float) -> list[str]:
    """The active `/sky watch`es, as `/sky watch` lists them, with Remove buttons."""
    if not watches:
        return [f"No GPU watches. `/sky {WATCH_USAGE}` DMs you once when GPUs come free."]
    return [watch_line(w, now) for w in watches]


def preference_part(user: str, pref: str, chosen: bool) -> str:
    return f"{preference_line(user, pref, chosen)} Change it with `/sky notify {CHOICES}`."


def ages_line(view: ClusterView, now: float) -> str:
    """How old each source's data is: "Slurm: as of 12 s ago · … · storage: never"."""
    ages = []
    for source, label in SOURCE_LABELS.items():
        taken_at = view.snapshot.source(source).taken_at
        ages.append(f"{label}: {'never' if taken_at is None else ago(taken_at, now)}")
    return "Data as of — " + " · ".join(ages) + ". Reopen this tab to refresh it."


# ----------------------------------------------------------------------------- unlinked user


def unlinked_blocks(table: CommandTable) -> list[Block]:
    intro = (
        "skybot does not know your cluster account yet, so it cannot show your jobs, "
        "your lab's GPUs or your directories here. Type `/sky link YOUR_CLUSTER_USER` "
        "(your login name on the cluster): skybot gives you a one-time code to write into "
        "a file only you can write, then `/sky link check` proves the account is yours."
    )
    return [
        header("Welcome to skybot"),
        section(intro),
        {"type": "divider"},
        header("Commands"),
        *lines_to_sections(command_lines(table)),
        context(FOOTER),
    ]
