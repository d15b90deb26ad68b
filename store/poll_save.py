"""One Slurm poll saved in one writer call: what it changed, the labs' usage it counted, and
(given `then`) what its transitions decide, in one transaction.

Before, a poll called the writer for the labs' limits, the save, the usage history in a
second transaction, and the job notifier three times more; each call is a hop to the
writer's thread and a wait behind whatever else is queued there (issue 41).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import sqlite_utils

from core.gc_pauses import no_collections
from core.lab_usage import LabUsage
from core.snapshot_rows import SlurmChanges
from core.transitions import Transition
from store.health import log_failure
from store.history import save_lab_usage
from store.slurm_writes import save_slurm_changes
from store.snapshots import record_poll_failure

log = logging.getLogger(__name__)

T = TypeVar("T")
# What a poll's transitions decide, run in the poll's transaction (the job DMs: the cursor
# moves in the transaction that enqueues them, scheduler/watchers/poll_dms.py).
Then = Callable[[sqlite_utils.Database], T]


class PollDecisions(Protocol[T]):
    """What decides in a poll's save (scheduler/watchers/poll_dms.py `PollDms`): asked for
    the decision on the loop before the save, told its outcome on the loop after it."""

    def deciding(self) -> Then[T]: ...

    def decided(self, outcome: T | None) -> None: ...


@dataclass(frozen=True, slots=True)
class UsageHistory:
    """How the labs' usage samples are kept: for `keep_days`, crediting GPU-seconds over at
    most `max_interval` since the previous sample (a missed poll counts; an outage not)."""

    keep_days: int
    max_interval: float


@dataclass(frozen=True, slots=True)
class PollToSave:
    """One poll of a cluster: its changes, when it was taken, what sacct said if it failed
    (None: it answered), and the labs' usage counted from the jobs after it."""

    changes: SlurmChanges
    at: float
    accounting_error: str | None
    usages: Sequence[LabUsage]
    history: UsageHistory


@dataclass(frozen=True, slots=True)
class PollSaved(Generic[T]):
    """The transitions the poll recorded, and what `then` decided of them (None: no `then`,
    or it failed, and its part was rolled back: the poll's save stands)."""

    transitions: list[Transition]
    decided: T | None


def save_poll(
    db: sqlite_utils.Database, cluster: str, poll: PollToSave, then: Then[T] | None = None
) -> PollSaved[T]:
    """Save `poll` of `cluster` and run `then` after it, all in one transaction: a kill -9
    leaves the whole poll with everything it decided, or none of it. A failing `then` is
    logged and its part undone; the poll's rows commit without it (what it would have decided
    is decided from the store again later)."""
    with no_collections(), db.atomic():
        if poll.accounting_error is not None:
            record_poll_failure(db, cluster, "accounting", poll.accounting_error, poll.at)
        transitions = save_slurm_changes(
            db, cluster, poll.changes, poll.at, poll.accounting_error is None
        )
        save_lab_usage(
            db,
            cluster,
            poll.usages,
            poll.at,
            poll.history.keep_days,
            poll.history.max_interval,
        )
        return PollSaved(transitions, _decided(db, then))


def _decided(db: sqlite_utils.Database, then: Then[T] | None) -> T | None:
    if then is None:
        return None
    try:
        with db.atomic():  # a savepoint: undone alone if it fails
            return then(db)
    except Exception:
        log_failure(log, "deciding a poll's DMs failed; its transitions stay queued")
        return None
