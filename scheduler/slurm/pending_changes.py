"""Changes that leave a job pending, seen within a bound where polls read only job states.

On Slurm 24.05+ a poll asks slurmctld for every job's state only (`--only-job-state`) and
fetches the full records of the jobs whose state changed. `scontrol update` of a pending
job's partition, account, QOS, time limit, GRES or hold leaves it PENDING, so the states
cannot show it; before this it waited for the full read every 20th poll (70-75 s).

`PENDING_LISTING` is a text `squeue` of each pending job's settings, one line per record.
It costs slurmctld one REQUEST_JOB_INFO, like a full read (squeue filters by state on its
own side), but prints a few hundred bytes per job where `--json` prints about 7 KB, so the
bot's host reads it in a fraction of a second. Each line's text is kept as a hash: a record
whose line differs from the last listing's is fetched again by id, in JSON, which stays the
one source of what a job is (this module never interprets a field). The listing runs as
often as `pending_listing_due` says the bound needs.

skybot's own actions (cancel, move to overcap) mark their job changed: the next poll fetches
it whatever its state, and the poll is brought forward (scheduler.schedule).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from scheduler.slurm.pacing import pending_listing_due

# Every setting of a pending job that its record shows (core.records.Job), each printed in
# full (":0"), "|" after each; the job id first and the free text last, so that a name
# holding "|" or a newline changes only its own record's hash. Priority is left out: a
# multifactor site recomputes every pending job's priority every few minutes, and skybot
# shows none (a hold shows as its reason).
_FIELDS = (
    "JobID",
    "ArrayTaskId",
    "Partition",
    "Account",
    "QOS",
    "TimeLimit",
    "tres-per-job",
    "tres-per-node",
    "tres-per-task",
    "tres-per-socket",
    "NumNodes",
    "NumTasks",
    "Reason",
    "UserName",
    "StdOut",
    "StdErr",
    "WorkDir",
    "Comment",
    "Name",
)
PENDING_LISTING = [
    "--all",
    "--noheader",
    "--states=PENDING",
    "--Format=" + ",".join(f"{name}:0|" for name in _FIELDS),
]

# A record's first line: its job id, then the separator.
_RECORD_START = re.compile(rb"^([0-9]+)\|", re.MULTILINE)


def pending_fingerprints(listing: bytes) -> dict[str, int]:
    """Each listed record's job id (as the states listing keys it) and a hash of its line."""
    starts = list(_RECORD_START.finditer(listing))
    fingerprints: dict[str, int] = {}
    for number, start in enumerate(starts):
        end = starts[number + 1].start() if number + 1 < len(starts) else len(listing)
        key = start.group(1).decode()
        line_hash = hash(listing[start.end() : end])
        # Listed twice (not seen, but possible): both lines must stay the same.
        before = fingerprints.get(key)
        fingerprints[key] = line_hash if before is None else hash((before, line_hash))
    return fingerprints


def changed_since(before: dict[str, int], now: dict[str, int]) -> list[str]:
    """The records whose line differs from `before`'s, or that `before` did not list: a
    job submitted since then was fetched when it appeared, maybe before a change."""
    return [key for key, value in now.items() if before.get(key) != value]


@dataclass
class PendingWatch:
    """Which pending jobs a states-only poll must fetch again, and when to list them.

    A listing counts once its poll is committed: until then the last committed one stays the
    baseline, so a poll that fails loses nothing, and ids marked changed stay marked."""

    bound_seconds: float
    interval_seconds: float
    monotonic: Callable[[], float] = time.monotonic
    # The last committed listing: when it started, and its fingerprints.
    _listed_at: float | None = None
    _seen: dict[str, int] | None = None
    # This poll's listing, committed with the poll.
    _listing: tuple[float, dict[str, int]] | None = None
    # Marked by skybot's own actions; `_taken` are the ones this poll reads.
    _marked: set[str] = field(default_factory=set)
    _taken: set[str] = field(default_factory=set)
    _last_poll_seconds: float = 0.0

    def mark_changed(self, job_id: str) -> None:
        self._marked.add(job_id)

    def listing_due(self) -> bool:
        since = None if self._listed_at is None else self.monotonic() - self._listed_at
        return pending_listing_due(
            since, self.interval_seconds, self._last_poll_seconds, self.bound_seconds
        )

    def begin_poll(self) -> float:
        """Take the marked ids for this poll; its start on the monotonic clock."""
        self._listing = None
        self._taken = set(self._marked)
        return self.monotonic()

    def listed(self, started: float, listing: bytes) -> None:
        self._listing = (started, pending_fingerprints(listing))

    def to_fetch(self, already: Iterable[str]) -> list[str]:
        """The ids to fetch besides `already`: marked ones, and pending records whose
        settings differ from the last committed listing (none before there is one)."""
        fetch = set(self._taken)
        if self._listing is not None and self._seen is not None:
            fetch.update(changed_since(self._seen, self._listing[1]))
        fetch.difference_update(already)
        return sorted(fetch, key=lambda key: (len(key), key))

    def committed(self, started: float) -> None:
        """The poll that began at `started` is in the store."""
        self._last_poll_seconds = self.monotonic() - started
        if self._listing is not None:
            self._listed_at, self._seen = self._listing
        self._listing = None
        self._marked -= self._taken
        self._taken = set()

    def failed(self) -> None:
        self._listing = None
        self._taken = set()
