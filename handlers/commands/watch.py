"""`/sky watch TYPE:N [--overcap] [--for 4h]`, `/sky watch` and `/sky unwatch ID|all`.

A watch is stored (store/watches.py) and looked at after every Slurm poll by the watcher
(scheduler/watchers/gpu_watches.py), which DMs once when the GPUs are free or when the watch
expires. A watch that is already true when typed is answered at once and not stored.
"""

from __future__ import annotations

import time

from core.buttons.remove_watch import remove_buttons
from core.cluster_config import LabConfig
from core.gpu_watch import (
    FIRED,
    Outcome,
    Watch,
    headroom_by_lab,
    is_free,
    parse_duration,
    sbatch_options,
    template_line,
    view_free_index,
    watch_line,
    where_words,
)
from core.job_template import TemplateError, parse_gpus
from core.notice_text import format_duration
from core.view import ClusterView
from handlers.commands.common import literal, not_linked, require_data, shown
from handlers.reply import Reply, section, simple
from handlers.router import Command, CommandRequest, UsageError
from handlers.services import Services, rows_cluster
from store.watches import (
    NewWatch,
    TooManyWatches,
    active_watches_of,
    add_watch,
    remove_watches,
)

USAGE = "watch TYPE:N [--overcap] [--for 4h]"
UNWATCH_USAGE = "unwatch ID|all"


async def watch(request: CommandRequest, services: Services) -> Reply:
    me = request.cluster_user
    if me is None:
        raise not_linked(USAGE)
    if services.writer is None or services.view is None:
        return simple("GPU watches are not available in this skybot.")
    if not request.args:
        watches = await services.writer.run(active_watches_of, request.team_id, request.user_id)
        return watch_list(watches, request.now)
    view = services.view()
    require_data(view, "slurm")
    gres, overcap, seconds = _parse(request.args, services)
    try:
        ask = parse_gpus(gres, view.snapshot.nodes)
    except TemplateError as error:
        raise UsageError(str(error)) from None
    if ask.gpu_type is None:
        raise UsageError("Give a GPU type too, e.g. `/sky watch a40:2`: `/sky free` lists them.")
    new = _new_watch(request, view, me, ask.gpu_type, ask.count, overcap)
    candidate = Watch(0, new.team_id, new.user_id, me, new.gpu_type, new.count, overcap,
                      new.lab, new.partition, new.account, request.now, request.now)  # fmt: skip
    spot = is_free(candidate, view_free_index(view), headroom_by_lab(view))
    if spot is not None:
        return simple(free_now(Outcome(candidate, FIRED, spot)))
    limit = services.config.watches.max_per_user
    try:
        stored = await services.writer.run(
            add_watch, rows_cluster(view, services.config), new, request.now, seconds, limit
        )
    except TooManyWatches:
        raise UsageError(
            f"You already have {limit} watches, the most allowed: `/sky unwatch ID` one first "
            "(`/sky watch` lists them)."
        ) from None
    return simple(
        f"👀 Watch #{stored.id}: I'll DM you once when {stored.count} {literal(stored.gpu_type)} "
        f"GPUs are free {where_words(stored)}, for the next {format_duration(seconds)}. "
        "`/sky watch` lists your watches."
    )


def free_now(outcome: Outcome) -> str:
    """The answer to a watch that is already true: no watch is stored."""
    watch, spot = outcome.watch, outcome.spot
    node = f" on {literal(spot.node)} ({spot.idle} idle)" if spot else ""
    return "\n".join(
        [
            f"🟢 {watch.count} {literal(watch.gpu_type)} GPUs are free {where_words(watch)}"
            f"{node} right now, so there is nothing to watch.",
            f"Use them now: {literal(f'sbatch {sbatch_options(watch)} job.sh', 400)}",
            f"A ready script: {literal(template_line(watch), 200)}",
        ]
    )


def _parse(args: tuple[str, ...], services: Services) -> tuple[str, bool, float]:
    limits = services.config.watches
    gres: str | None = None
    overcap = False
    seconds = 3600 * limits.default_hours
    rest = list(args)
    while rest:
        word = rest.pop(0)
        name, has_value, value = word.partition("=")
        if name == "--overcap" and not has_value:
            overcap = True
        elif name == "--for":
            if not has_value:
                if not rest:
                    raise UsageError(f"`--for` needs a duration, e.g. `--for 4h`. `/sky {USAGE}`")
                value = rest.pop(0)
            seconds = _duration(value, limits.min_seconds, 3600 * limits.max_hours)
        elif word.startswith("-") or gres is not None:
            raise UsageError(f"{shown(word)} is not something `/sky watch` takes: `/sky {USAGE}`")
        else:
            gres = word
    if gres is None:
        raise UsageError(f"Which GPUs? Usage: `/sky {USAGE}`, e.g. `/sky watch a40:2`.")
    return gres, overcap, seconds


def _duration(text: str, least: float, most: float) -> float:
    seconds = parse_duration(text)
    if seconds is None:
        raise UsageError(f"{shown(text)} is not a duration: write e.g. `4h`, `90m`, `1h30m`.")
    if not least <= seconds <= most:
        raise UsageError(
            f"`--for` must be between {format_duration(least)} and {format_duration(most)}."
        )
    return seconds


def _new_watch(
    request: CommandRequest, view: ClusterView, me: str, gpu_type: str, count: int, overcap: bool
) -> NewWatch:
    labs = view.labs_of_user(me)
    if overcap:
        lab_name = labs[0].name if labs else ""
        partition, account = view.overcap_partition, view.overcap_account
    else:
        if not labs:
            raise UsageError(
                f"skybot knows no lab of {literal(me)}, so no cap to watch: "
                "`/sky watch TYPE:N --overcap` watches idle GPUs on overcap instead."
            )
        lab: LabConfig = labs[0]
        lab_name, partition, account = lab.name, lab.partition, lab.account
    gpu_nodes = [n for n in view.snapshot.nodes if partition in n.partitions]
    if not any(n.gpus_total.get(gpu_type, 0) >= count for n in gpu_nodes):
        raise UsageError(
            f"No node of partition {literal(partition)} has {count} {literal(gpu_type)} GPUs, "
            "so that watch could never come true."
        )
    return NewWatch(
        request.team_id, request.user_id, me, gpu_type, count, overcap, lab_name, partition,
        account,
    )  # fmt: skip


def watch_list(watches: list[Watch], now: float) -> Reply:
    if not watches:
        return simple(f"You have no GPU watches. Start one with `/sky {USAGE}`.")
    lines = ["Your GPU watches:", *(watch_line(w, now) for w in watches)]
    text = "\n".join(lines)
    return Reply(text, [section(text), *remove_buttons(watches)])


async def unwatch(request: CommandRequest, services: Services) -> Reply:
    if services.writer is None:
        return simple("GPU watches are not available in this skybot.")
    if len(request.args) != 1:
        raise UsageError(f"Usage: `/sky {UNWATCH_USAGE}` (`/sky watch` lists your watches).")
    word = request.args[0].lstrip("#").lower()
    if word != "all" and not (word.isdigit() and len(word) <= 12):
        raise UsageError(f"{shown(request.args[0])} is not a watch number or `all`.")
    watch_id = None if word == "all" else int(word)
    return simple(await unwatch_text(services, request.team_id, request.user_id, watch_id))


async def unwatch_text(services: Services, team_id: str, user_id: str, watch_id: int | None) -> str:
    """Remove the user's watch (None: all); the sentence saying what happened."""
    assert services.writer is not None
    removed = await services.writer.run(remove_watches, team_id, user_id, watch_id, time.time())
    if watch_id is None:
        return f"Removed {removed} watch{'es' if removed != 1 else ''}."
    if removed:
        return f"Removed watch #{watch_id}."
    return f"You have no active watch #{watch_id} (`/sky watch` lists yours)."


WATCH = Command(
    "watch",
    USAGE,
    "DM me once when N GPUs of a type are free under my lab's cap (or idle, with --overcap)",
    act=watch,
    details=(
        "`--overcap`: idle GPUs on the preemptible partition instead of your lab's cap. "
        "`--for`: how long to watch, e.g. `90m` (4h unless you say; 24h at most unless the "
        "admins set `[watches]` otherwise). GPUs on one node of your lab's partition (its first, "
        "if you are in several labs). The DM has the sbatch options to use them at once. "
        "`/sky watch` alone lists your watches."
    ),
)
UNWATCH_COMMAND = Command(
    "unwatch",
    UNWATCH_USAGE,
    "remove one of your GPU watches, or all of them",
    act=unwatch,
)
