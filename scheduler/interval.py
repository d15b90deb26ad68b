"""Work repeated at an interval on the monotonic clock, and whether it keeps completing.

APScheduler 3.x computes an interval job's next run from the wall clock: an NTP step back by
an hour stopped every poll for that hour, and the loop's heartbeat never noticed. These
loops wait on the event loop's own clock (`loop.time()`, monotonic), so a step of the wall
clock in either direction changes nothing about when they run. Each records when it last
completed, on the same clock, so readiness and the watchdog can see a poller that stopped
completing whatever the heartbeat says.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from scheduler.log_cluster import WORKING_FOR
from store.health import log_failure

log = logging.getLogger(__name__)


@dataclass
class PollProgress:
    """When a repeated piece of work last completed, in `loop.time()` seconds."""

    source: str
    interval: float
    # How long one run may take on top of the interval before it is late (its command
    # timeout): a Slurm outage makes polls fail, not stop completing.
    grace: float
    # None until its loop is started.
    started_at: float | None = None
    completed_at: float | None = None
    # When the run in progress began; None between runs.
    running_since: float | None = None

    def late_by(self, now: float, intervals: float) -> float | None:
        """Seconds since the last completed run (or the start) if that is longer than
        `intervals` intervals plus the grace; None while it keeps up."""
        last = self.completed_at if self.completed_at is not None else self.started_at
        if last is None:
            return None
        silent = now - last
        return silent if silent > intervals * self.interval + self.grace else None

    def stuck_for(self, now: float, intervals: float) -> float | None:
        """Seconds the run in progress has taken, if longer than `intervals` intervals plus
        the grace; None while none runs or it keeps up."""
        if self.running_since is None:
            return None
        running = now - self.running_since
        return running if running > intervals * self.interval + self.grace else None

    def describe_late(self, silent: float) -> str:
        done = "has not completed" if self.completed_at is None else "has not completed again"
        return f"the {self.source} poll {done} for {silent:.0f} s (every {self.interval:g} s)"


def next_due(started: float, interval: float, now: float) -> float:
    """The first tick of `started + k * interval` (k >= 1) not in the past: a run that took
    longer than the interval skips the ticks it overran, as coalesced runs do, instead of
    queueing them up."""
    if now < started + interval:
        return started + interval
    return started + interval * math.ceil((now - started) / interval + 1e-9)


class IntervalLoop:
    """Runs `work` now and then every `progress.interval` seconds of loop time, one run at
    a time, until cancelled. `work` handles its own failures; anything it lets through is
    logged and the loop goes on."""

    def __init__(
        self, progress: PollProgress, work: Callable[[], Awaitable[object]], cluster: str = ""
    ) -> None:
        self.progress = progress
        self.work = work
        # The cluster whose poll this is ("" for none): what its runs log names it.
        self.cluster = cluster
        # How many times it was abandoned as stuck and started again (scheduler/schedule.py).
        self.restarts = 0
        # Set by `run_soon`: the wait for the next run ends at once.
        self._soon = asyncio.Event()

    def run_soon(self) -> None:
        """Run now, or right after the run in progress, and on the interval from then."""
        self._soon.set()

    async def run(self) -> None:
        # What this task (and the tasks it starts) logs names the cluster it polls.
        WORKING_FOR.set(self.cluster)
        loop = asyncio.get_running_loop()
        due = loop.time()
        if self.progress.started_at is None:
            self.progress.started_at = due
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._soon.wait(), max(0.0, due - loop.time()))
            # Cleared before the run: asked for during it, the next one follows at once.
            self._soon.clear()
            started = self.progress.running_since = loop.time()
            try:
                await self.work()
            except Exception:
                log_failure(log, "%s poll failed", self.progress.source)
            self.progress.running_since = None
            self.progress.completed_at = loop.time()
            due = next_due(started, self.progress.interval, loop.time())


class ClockStepWatch:
    """Notices the wall clock jumping against the monotonic one (NTP stepping it, an admin
    setting it): what waits on wall-clock deadlines (the outbox's retries, the weekly digest's
    cron trigger) is told, so it can look again now instead of in an hour."""

    def __init__(
        self,
        wall: Callable[[], float],
        monotonic: Callable[[], float],
        threshold_seconds: float = 5.0,
    ) -> None:
        self._wall = wall
        self._monotonic = monotonic
        self._threshold = threshold_seconds
        self._offset = wall() - monotonic()

    def step(self) -> float | None:
        """Seconds the wall clock moved against the monotonic one since the last call, if
        more than the threshold (negative: back); None otherwise."""
        offset = self._wall() - self._monotonic()
        moved = offset - self._offset
        self._offset = offset
        return moved if abs(moved) > self._threshold else None
