"""Helpers every read-only `/sky` command shares: data freshness, formatting, name matching.

Commands answer only from the ClusterView they are given and the request's `now`, so the same
snapshot and the same `now` always give the same answer (which is what makes them testable).
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from core.cluster_config import LabConfig
from core.job_facts import job_label as job_label
from core.job_facts import shown_label

# The commands format like the notifications do; re-exported for them.
from core.notice_text import format_bytes as format_bytes
from core.notice_text import format_duration as format_duration
from core.notice_text import format_gpus as format_gpus
from core.notice_text import format_job_gpus as format_job_gpus
from core.notice_text import plural as plural
from core.records import Job
from core.slack_text import literal as literal
from core.slurm_failure import restd_outage_words
from core.snapshot import SourceStatus
from core.user_names import cluster_user_name
from core.view import ClusterView
from handlers.commands.stamps import Stamp, age_key, quiet_until
from handlers.reply import (
    MAX_BLOCKS,
    Block,
    Reply,
    context,
    lines_to_sections,
    section,
)
from handlers.router import CommandRequest, UsageError
from handlers.services import Services
from store.transitions import last_job_record

# How each data source is named in freshness warnings.
SOURCE_LABELS = {
    "slurm": "Slurm",
    "accounting": "Slurm accounting (sacct: job ends)",
    "caps": "sacctmgr (lab GPU caps)",
    "storage": "the storage scan",
    "limits": "Reading Slurm's partition and QOS limits and reservations",
}
# Age beyond which data is called stale even without an error: a few poll intervals
# (Slurm is polled every ~15 s, caps every ~5 min, storage every ~5 min by default).
STALE_AFTER_SECONDS = {"slurm": 120.0, "caps": 1800.0, "storage": 1800.0, "limits": 1800.0}
# Lines of a list shown before "… and N more": keeps the answer short to read and far inside
# Slack's 50 blocks / 3,000 characters per section.
MAX_LIST_LINES = 25
# Longest user-typed word echoed back or matched against names.
MAX_ECHO = 40


class NoData(UsageError):
    """A source has never answered: shown to the user like a usage error, as one line."""


# ---------------------------------------------------------------- formatting


def shown(word: str, limit: int = MAX_ECHO) -> str:
    """A word the user typed, echoed as an inert literal, clipped to `limit`."""
    return literal(word, limit)


def one_line(text: str, limit: int = 160) -> str:
    """An error message from a poller as one short, inert literal."""
    return literal(text, limit)


def ago(timestamp: float, now: float) -> str:
    if timestamp >= now - 0.5:
        return "just now"  # also covers a poller clock slightly ahead of ours
    return f"{format_duration(now - timestamp)} ago"


def format_kib(kib: int) -> str:
    return format_bytes(kib * 1024)


def gpu_type_name(gpu_type: str) -> str:
    # Slurm reports GPUs requested without a type under "", shown as "gpu" like `--gres=gpu:2`.
    return gpu_type or "gpu"


# format_counts' answers: the same few count lists (idle GPUs by type, a lab's use) are
# shown in every ack until the next poll; bounded, since users' counts differ too.
_COUNTS_SHOWN: dict[tuple[tuple[str, int], ...], str] = {}
MAX_COUNTS_SHOWN = 256


def format_counts(counts: Mapping[str, int]) -> str:
    """'alice 2, bob 2' in the mapping's order (callers sort)."""
    key = tuple(counts.items())
    shown = _COUNTS_SHOWN.get(key)
    if shown is None:
        shown = ", ".join(f"{literal(gpu_type_name(k))} {v}" for k, v in key)
        if len(_COUNTS_SHOWN) >= MAX_COUNTS_SHOWN:
            _COUNTS_SHOWN.clear()
        _COUNTS_SHOWN[key] = shown
    return shown


def bounded(lines: list[str], limit: int = MAX_LIST_LINES) -> list[str]:
    """The first `limit` lines then '… and N more' (the shared list cut-off)."""
    if len(lines) <= limit:
        return lines
    return [*lines[:limit], f"… and {len(lines) - limit} more"]


# ---------------------------------------------------------------- freshness


def require_data(view: ClusterView, source: str) -> None:
    """Refuse to answer from a source that has never answered, rather than show emptiness.

    An empty job list would read as "you have no jobs" when skybot simply knows nothing yet.
    """
    status = view.snapshot.source(source)
    if status.taken_at is not None:
        return
    label = SOURCE_LABELS.get(source, source)
    if source == "storage":
        message = "skybot has not scanned storage yet — try again in a few minutes."
    else:
        message = f"skybot has not heard from {label} yet — try again in a few seconds."
    if status.error:
        message += f" (Last attempt failed: {one_line(status.error)})"
    raise NoData(message)


def freshness_lines(
    view: ClusterView, now: float, source: str, also: Sequence[str] = ()
) -> tuple[list[str], str]:
    """(warnings, context line) for the sources an answer used.

    The context line gives the main source's age ("as of 12 s ago"); warnings flag a source
    that is failing or stale, so nobody acts on old data thinking it is live.
    """
    warnings = [w for name in (source, *also) if (w := _warning(view, now, name))]
    taken_at = _status(view, source).taken_at
    age = ago(taken_at, now) if taken_at is not None else "never"
    return warnings, f"as of {age}"


def _status(view: ClusterView, source: str) -> SourceStatus:
    """view.snapshot.source(source), without making its never-heard-of default every time:
    read for every source of every ack."""
    status = view.snapshot.status.get(source)
    return status if status is not None else SourceStatus(source)


def _warning(view: ClusterView, now: float, source: str) -> str | None:
    status = _status(view, source)
    if status.taken_at is None:
        return None if source != "caps" else "⚠️ skybot has not read the lab GPU caps yet."
    stale = now - status.taken_at > STALE_AFTER_SECONDS.get(source, 600.0)
    if not (status.failing or stale):
        return None  # the usual case, on every ack: no words to make
    data_age = ago(status.taken_at, now)
    if status.failing:
        return "⚠️ " + outage_words(source, status.error or "", status.error_at, data_age, now)
    label = SOURCE_LABELS.get(source, source)
    return f"⚠️ {label} data is from {data_age}; skybot may be behind."


def outage_words(
    source: str, error: str, failing_since: float | None, data_age: str, now: float
) -> str:
    """A failing source in the words its users need: which part of Slurm is down and what
    that means for the answer. Slurm's own message ("Unspecified error") helps nobody in
    Slack; the admins have it in the log and in /readyz."""
    since = _since(failing_since, now)
    restd = restd_outage_words(source, error, since, data_age)
    if restd is not None:
        return restd
    if source == "slurm":
        return (
            f"The Slurm controller (slurmctld) has not answered{since}: "
            f"jobs and GPUs are shown as of {data_age}."
        )
    if source == "accounting":
        return f"{_accounting(error)} has not answered{since}: finished jobs may be reported late."
    if source == "caps":
        return (
            f"{_accounting(error, 'asked by sacctmgr')} has not answered{since}: "
            f"lab GPU caps are as of {data_age}."
        )
    label = SOURCE_LABELS.get(source, source)
    return f"{label} failed{since} ({one_line(error)}): showing data from {data_age}."


# slurmdbd's answer when its own database is down (22.05 and 24.11); slurmdbd itself down
# gives "Connection refused" instead.
_DATABASE_DOWN = "Unable to connect to database"


def _accounting(error: str, asked: str = "") -> str:
    """Which part of Slurm accounting failed, as sacct's or sacctmgr's error says: slurmdbd,
    or the database behind it (slurmdbd answers, the database does not)."""
    how = f", {asked}" if asked else ""
    if _DATABASE_DOWN in error:
        return f"The accounting database (behind slurmdbd{how})"
    return f"Slurm accounting (slurmdbd{how})"


def _since(failing_since: float | None, now: float) -> str:
    """' for 4 min (since 14:02 UTC)', or ' since 14:02:07 UTC' for a failure seconds old:
    "for 0 s" reads as if nothing were wrong."""
    if failing_since is None:
        return ""
    if now - failing_since < 60:
        return time.strftime(" since %H:%M:%S UTC", time.gmtime(failing_since))
    clock = time.strftime("%H:%M UTC", time.gmtime(failing_since))
    return f" for {format_duration(now - failing_since)} (since {clock})"


# ---------------------------------------------------------------- replies


def answer(
    view: ClusterView,
    request: CommandRequest,
    lines: list[str],
    source: str,
    also: Sequence[str] = (),
) -> Reply:
    """The standard reply: warnings first, the body, then "as of …" — in text and blocks alike."""
    body = "\n".join(lines) if lines else None
    return FreshAnswer(body, _sections(view, lines), source, tuple(also)).at(view, request.now)


@dataclass(frozen=True)
class FreshAnswer:
    """An `answer()` less its warnings and "as of" line, which depend on when it is asked:
    the router keeps it for a snapshot and stamps it again for the next ack (Reply.fresh).
    It holds no view (a view's memo keeps it: a cycle would outlive the snapshot)."""

    # The body's lines joined (None: no lines), and packed into sections.
    text: str | None
    sections: list[Block]
    source: str
    also: tuple[str, ...]
    # The last stamp while all was well (none, or one): acks in the same second share its
    # text and blocks. It holds no Reply: a Reply holds this answer (fresh), a cycle.
    _last: list[Stamp] = field(default_factory=list, compare=False, repr=False)

    def at(self, view: ClusterView, now: float, in_channel: bool = False) -> Reply:
        age = age_key(_status(view, self.source).taken_at, now)
        for last in self._last:
            if last.holds(view.snapshot, in_channel, now, age):
                return Reply(last.text, last.blocks, in_channel, fresh=self)
        warnings, age_line = freshness_lines(view, now, self.source, self.also)
        if not warnings and len(self.sections) < MAX_BLOCKS:  # every ack while all is well
            stamp = f"_{age_line}_"
            text = stamp if self.text is None else f"{self.text}\n{stamp}"
            reply = Reply(text, [*self.sections, context(age_line)], in_channel, fresh=self)
            quiet = quiet_until(
                (_status(view, name).taken_at, STALE_AFTER_SECONDS.get(name, 600.0))
                for name in (self.source, *self.also)
            )
            self._last[:] = [Stamp(view.snapshot, in_channel, quiet, age, text, reply.blocks)]
            return reply
        blocks: list[Block] = [section(w) for w in warnings]
        body = self.sections
        room = MAX_BLOCKS - len(blocks) - 1
        if len(body) > room:  # cannot happen with bounded lists, but Slack rejects 51 blocks
            body = [*body[: room - 1], section("… (answer shortened)")]
        blocks += body
        blocks.append(context(age_line))
        body_text = [] if self.text is None else [self.text]
        text = "\n".join([*warnings, *body_text, f"_{age_line}_"])
        return Reply(text, blocks, in_channel, fresh=self)


# ---------------------------------------------------------------- arguments and names


# Bodies packed into sections per snapshot: enough for every lab's answer, bounded so that
# answers which differ every time (ages, a user's own jobs) cannot grow it between polls.
MAX_SHARED_BODIES = 64


def _sections(view: ClusterView, lines: list[str]) -> list[Block]:
    """The body's sections. A body is often the snapshot's alone (a lab's lines, memoised
    per view) and asked for by many, so it is packed once per snapshot, not once per ack.
    The blocks are shared by those answers: nothing changes a block once built."""
    shared: dict[tuple[str, ...], list[Block]] = view.memo("shared bodies", dict)
    key = tuple(lines)
    body = shared.get(key)
    if body is None:
        body = lines_to_sections(lines)
        if len(shared) < MAX_SHARED_BODIES:
            shared[key] = body
    return body


def at_most_one(request: CommandRequest, usage: str) -> str | None:
    if len(request.args) > 1:
        extra = shown(" ".join(request.args[1:]))
        raise UsageError(f"Too many arguments ({extra}). Usage: `/sky {usage}`")
    return request.args[0] if request.args else None


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The closest choice, compared case-insensitively; None if nothing is near."""
    if len(word) > 2 * MAX_ECHO:
        return None  # a paste of a whole paragraph is not a typo of a name
    by_folded = {c.casefold(): c for c in choices}
    close = difflib.get_close_matches(word.casefold(), list(by_folded), n=1, cutoff=0.6)
    return by_folded[close[0]] if close else None


def lab_names(view: ClusterView) -> str:
    return ", ".join(f"{literal(lab.name)}" for lab in view.labs) or "(none configured)"


def find_lab(view: ClusterView, name: str) -> LabConfig:
    """The lab called `name` (any case), or a UsageError with a suggestion or the list."""
    lab = view.lab(name)
    if lab is not None:
        return lab
    hint = did_you_mean(name, (lab.name for lab in view.labs))
    if hint:
        raise UsageError(f"I don't know a lab called {shown(name)}. Did you mean {literal(hint)}?")
    raise UsageError(f"I don't know a lab called {shown(name)}. Labs: {lab_names(view)}.")


def lab_for_account(view: ClusterView, account: str) -> LabConfig | None:
    return next((lab for lab in view.labs if lab.account == account), None)


def overcap_flags(view: ClusterView) -> str:
    """The sbatch options that send a job to overcap; a site whose overcap needs no account of
    its own (`overcap_account = ""`) is told only the partition."""
    account = f" --account={view.overcap_account}" if view.overcap_account else ""
    return literal(f"--partition={view.overcap_partition}{account}")


def check_user_name(typed: str) -> str:
    """The cluster user a typed name means (core/user_names.py), or a UsageError."""
    name = cluster_user_name(typed)
    if name is None:
        raise UsageError(
            f"{shown(typed)} is not a cluster user name (a lower-case letter or `_`, then "
            "letters, digits or `_ . -`, at most 32 in all)."
        )
    return name


def known_users(view: ClusterView) -> set[str]:
    """Every cluster user skybot has seen: jobs, lab memberships and storage directories."""
    users = set(view.jobs_by_user)
    for members in view.snapshot.members.values():
        users |= members
    users |= {d.owner for d in view.snapshot.directories}
    return users


def not_linked(usage: str) -> UsageError:
    """The one line every personal command gives a Slack user skybot cannot place yet."""
    return UsageError(
        "I don't know your cluster account yet: link it with `/sky link YOUR_CLUSTER_USER`, "
        f"or name one: `/sky {usage}`."
    )


async def recorded_job(services: Services, job_id: int) -> Job | None:
    """The job as the live snapshot shows it, else as skybot last recorded it (ended jobs are
    kept `database.history_days` with their transitions); None if skybot never knew it."""
    if services.view is not None:
        live = services.view().jobs_by_id.get(job_id)
        if live is not None:
            return live
    if services.writer is not None:
        return await services.writer.run(last_job_record, services.cluster_name, job_id)
    return None


async def own_recorded_job(services: Services, job_id: int, me: str, refusal: str) -> Job:
    """`recorded_job`, refused (before anything else is asked) when skybot does not know it or
    it is not `me`'s; `refusal` ends the second answer, saying what the command does not do."""
    job = await recorded_job(services, job_id)
    if job is None:
        days = services.config.database.history_days
        raise UsageError(f"skybot does not know job {job_id}: it keeps ended jobs for {days} days.")
    if job.user != me:
        raise UsageError(
            f"Job {shown_label(job)} belongs to {literal(job.user)}, not to you ({literal(me)}): "
            f"{refusal}"
        )
    return job
