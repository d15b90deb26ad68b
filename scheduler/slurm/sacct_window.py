"""Which span of job ends each poll asks accounting for: no end missed, none re-read for long.

sacct reads from slurmdbd, which learns of a job's end after slurmctld, through a queue: a
window that starts at the last poll would miss the ends still queued. So each window starts
`sacct_overlap_seconds` before the last poll that accounting answered, unless slurmctld's
queue to slurmdbd was seen empty (sdiag) and a later sacct has read past that time.
"""

from __future__ import annotations

from store.slurm_writes import history_start
from store.snapshots import load_source_status
from store.writer import StoreWriter

# After a long outage, do not replay more than this much history.
SACCT_MAX_LOOKBACK_SECONDS = 6 * 3600.0
# slurmctld sends each job's end to slurmdbd through a queue, in order, and sdiag shows that
# queue's length. Seen empty at some time, every job that ended before then is in what any
# later sacct reads; once such a sacct has answered, later windows start only this much
# before that time (clock skew between this host and Slurm's, sacct's whole seconds,
# slurmdbd's CommitDelay) rather than a whole `sacct_overlap_seconds` before the last poll.
# sdiag runs beside the poll's other commands, so a sacct later than it is the next poll's:
# after a mass end (20,000 jobs cancelled) two or three polls read them all, not every poll
# for five minutes (issue 26, item 11).
SACCT_CAUGHT_UP_MARGIN_SECONDS = 10.0
# sacct's --endtime lies this far past the latest time skybot has seen: only jobs that ended
# by then exist, so a far end costs nothing, and a clock stepped back (or behind slurmdbd's)
# by up to this much still sees the jobs that end now.
SACCT_END_MARGIN_SECONDS = 24 * 3600.0


class SacctWindow:
    """The start and end of each poll's accounting read, and what moves them."""

    def __init__(self, writer: StoreWriter, cluster: str, overlap_seconds: float) -> None:
        self._writer = writer
        self.cluster = cluster
        self._overlap = overlap_seconds
        self._since: float | None = None
        self._floor = 0.0
        # When slurmctld's queue to slurmdbd was seen empty: the latest such time that a
        # later sacct has read past, and the latest not yet read past.
        self._dbd_caught_up: float | None = None
        self._dbd_empty_unread: float | None = None
        # The latest wall-clock time a poll started at: a step back does not go back on it.
        self._latest_now = 0.0

    async def span(self, now: float) -> tuple[float, float]:
        """This poll's window: from its start (see `_start`) to well past the latest time
        any poll started at."""
        start = await self._start(now)
        self._latest_now = max(self._latest_now, now)
        return start, self._latest_now + SACCT_END_MARGIN_SECONDS

    def answered(self, now: float) -> None:
        """The poll that started at `now` committed what sacct reported."""
        self._since = now

    def note_dbd_queue(self, empty_at: float | None, sacct_read: bool) -> None:
        """An empty queue seen by an earlier poll counts once this poll's sacct, which ran
        after it, has answered; this poll's counts after the next one's."""
        if sacct_read:
            if self._dbd_empty_unread is not None:
                self._dbd_caught_up = self._dbd_empty_unread
            self._dbd_empty_unread = empty_at
        elif empty_at is not None:
            self._dbd_empty_unread = empty_at

    async def _start(self, now: float) -> float:
        """From the last successful poll (a little before, for slurmdbd's lag: in full,
        unless slurmctld was seen to have sent slurmdbd every end), so that jobs that ended
        while skybot was down are still seen to end; never from before a brand-new store's
        first poll: history from before skybot was installed is nobody's news."""
        if self._since is None:
            # From when sacct last answered: job ends during an accounting outage that
            # skybot was restarted in are still found.
            accounting = await self._writer.run(load_source_status, self.cluster, "accounting")
            slurm = await self._writer.run(load_source_status, self.cluster, "slurm")
            self._since = accounting.taken_at or slurm.taken_at or now
            self._floor = await self._writer.run(history_start, self.cluster, now)
        # After the wall clock is stepped back, jobs end at times before the last poll's: the
        # window starts at whichever came first.
        start = min(self._since, now) - self._overlap
        if now < self._since:
            # The wall clock was stepped back: ends from now on carry times before those
            # seen empty, which say nothing of them any more.
            self._dbd_caught_up = self._dbd_empty_unread = None
        if self._dbd_caught_up is not None:
            # Every end before then was read by a sacct that answered.
            start = max(start, self._dbd_caught_up - SACCT_CAUGHT_UP_MARGIN_SECONDS)
        return max(start, min(self._floor, now), now - SACCT_MAX_LOOKBACK_SECONDS)
