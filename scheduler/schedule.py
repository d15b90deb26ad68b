"""The time-driven side of skybot, in the bot's event loop.

Polls run on the monotonic clock (scheduler/interval.py): a wall-clock step in either
direction changes nothing about when they run. APScheduler keeps only what is meant by the
calendar, the weekly digest; after a wall-clock step it is woken to look at its calendar
again, and the digest's outbox keys (one per lab, channel and week) make a second run for
the same week enqueue nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger

from core.config_schema import Config
from scheduler.interval import ClockStepWatch, IntervalLoop, PollProgress
from scheduler.slurm.pacing import PollPacer
from scheduler.slurm.poller import SlurmPoller
from scheduler.storage_poller import StoragePoller
from store.health import is_store_fault

log = logging.getLogger(__name__)

AfterPoll = Callable[[], Awaitable[object]]
# (source, seconds): how long one poll took, for the metrics; and the interval polls run at.
ObservePoll = Callable[[str, float], None]
# Told how far the wall clock jumped (seconds, negative: back).
OnClockStep = Callable[[float], None]

# How often the wall clock is compared with the monotonic one.
CLOCK_CHECK_SECONDS = 1.0


@dataclass
class PollSchedule:
    """The poll loops, the digest's calendar, and the polls running right now: shutdown ends
    those instead of abandoning them (and their Slurm client processes) to a closed loop."""

    scheduler: AsyncIOScheduler
    loops: dict[str, IntervalLoop] = field(default_factory=dict)
    # Ends what the pollers keep running between polls (the Slurm poll worker).
    close_pollers: Callable[[], Awaitable[None]] | None = None
    in_flight: set[asyncio.Task[None]] = field(default_factory=set)
    on_clock_step: list[OnClockStep] = field(default_factory=list)
    stopping: bool = False
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def progress(self) -> dict[str, PollProgress]:
        return {source: loop.progress for source, loop in self.loops.items()}

    def late_polls(self, now: float, intervals: float) -> list[str]:
        """Each poller that has not completed within `intervals` intervals (plus its command
        timeout), said in words; `now` is `loop.time()`."""
        late = []
        for progress in self.progress.values():
            silent = progress.late_by(now, intervals)
            if silent is not None:
                late.append(progress.describe_late(silent))
        return late

    def poll_slurm_soon(self) -> None:
        """Bring the next Slurm poll forward to now (right after the running one, if one
        runs): skybot just changed a job, and its user should see that at once."""
        loop = self.loops.get("slurm")
        if loop is not None and not self.stopping:
            loop.run_soon()

    def start(self) -> None:
        self.scheduler.start()
        now = asyncio.get_running_loop().time()
        for source, loop in self.loops.items():
            loop.progress.started_at = now
            self._tasks.append(asyncio.create_task(loop.run(), name=f"poll-{source}"))
        self._tasks.append(asyncio.create_task(self._watch_clock(), name="clock-steps"))

    async def _watch_clock(self) -> None:
        watch = ClockStepWatch(time.time, time.monotonic)
        while True:
            await asyncio.sleep(CLOCK_CHECK_SECONDS)
            moved = watch.step()
            if moved is None:
                continue
            log.warning(
                "the wall clock jumped %s by %.0f s: polls keep their interval; retries and "
                "the digest's calendar are looked at again",
                "back" if moved < 0 else "forward",
                abs(moved),
            )
            if self.scheduler.running:
                self.scheduler.wakeup()
            for listener in self.on_clock_step:
                listener(moved)

    async def stop(self) -> None:
        self.stopping = True
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        tasks = [*self._tasks, *self.in_flight]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        if self.close_pollers is not None:
            await self.close_pollers()


@dataclass
class _PollSpec:
    source: str
    poll: Callable[[], Awaitable[bool]]
    seconds: float
    watch: AfterPoll | None


def build_scheduler(
    config: Config,
    slurm: SlurmPoller,
    storage: StoragePoller,
    after_poll: AfterPoll,
    *,
    after_slurm: AfterPoll | None = None,
    after_storage: AfterPoll | None = None,
    observe: ObservePoll | None = None,
    observe_interval: ObservePoll | None = None,
    weekly_digest: AfterPoll | None = None,
    after_each_poll: Callable[[], object] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> PollSchedule:
    """One instance of each poll at a time; a late run is coalesced, never queued up.

    `after_poll` (the snapshot cache refresh) runs after every poll; `after_slurm` and
    `after_storage` (the watchers) run after it, so they see the snapshot just written;
    `after_each_poll` (the database file's identity check) after every poll attempt.
    """
    scheduler = AsyncIOScheduler(job_defaults={"max_instances": 1, "coalesce": True})
    schedule = PollSchedule(scheduler, close_pollers=slurm.close)
    pace = _pacing(config, schedule, observe_interval, slurm.set_interval)

    def then_refresh(spec: _PollSpec) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            task = asyncio.current_task()
            if task is not None:
                schedule.in_flight.add(task)
            try:
                started = clock()
                await spec.poll()
                took = clock() - started
                if observe is not None:
                    observe(spec.source, took)
                if spec.source == "slurm":
                    pace(took)
                await after_poll()
                if spec.watch is not None:
                    await spec.watch()
            except asyncio.CancelledError:
                # Ended by stop(): not a failure, and it ends the poll's loop too.
                if schedule.stopping:
                    log.debug("%s poll ended: skybot is stopping", spec.source)
                raise
            except Exception as error:
                if not is_store_fault(error):
                    raise
                # The store's health says this once per episode, not once per poll.
                log.debug("%s poll: the database is failing: %s", spec.source, error)
            finally:
                schedule.in_flight.discard(task)
                if after_each_poll is not None:
                    after_each_poll()

        return run

    grace = config.slurm.command_timeout_seconds
    for spec in _poll_specs(config, slurm, storage, after_slurm, after_storage):
        if observe_interval is not None:
            observe_interval(spec.source, spec.seconds)
        progress = PollProgress(spec.source, spec.seconds, grace)
        schedule.loops[spec.source] = IntervalLoop(progress, then_refresh(spec))
    if weekly_digest is not None:
        _add_digest(config, scheduler, weekly_digest)
    return schedule


def _poll_specs(
    config: Config,
    slurm: SlurmPoller,
    storage: StoragePoller,
    after_slurm: AfterPoll | None,
    after_storage: AfterPoll | None,
) -> list[_PollSpec]:
    return [
        _PollSpec("slurm", slurm.poll_jobs, config.slurm.poll_seconds, after_slurm),
        _PollSpec("caps", slurm.poll_caps, config.slurm.caps_poll_seconds, None),
        _PollSpec("storage", storage.poll, config.storage.poll_seconds, after_storage),
    ]


def _pacing(
    config: Config,
    schedule: PollSchedule,
    observe_interval: ObservePoll | None,
    tell_poller: Callable[[float], None],
) -> Callable[[float], None]:
    pacer = PollPacer(
        base_seconds=config.slurm.poll_seconds,
        max_share=config.slurm.max_poll_share,
        # Never so long that /readyz would call the snapshot stale between two polls.
        max_seconds=config.slurm.poll_seconds * max(1.0, config.metrics.stale_after_polls - 1),
    )

    def pace(seconds: float) -> None:
        interval = pacer.observe(seconds)
        if interval is None:
            return
        if interval > config.slurm.poll_seconds:
            log.warning(
                "slurm poll took %.1f s, over %.0f%% of the poll interval: polling every %.0f s",
                seconds,
                100 * config.slurm.max_poll_share,
                interval,
            )
        else:
            log.info("slurm polls are cheap again: polling every %.0f s", interval)
        with contextlib.suppress(KeyError):
            schedule.loops["slurm"].progress.interval = interval
        # It plans its listings of pending jobs on the interval.
        tell_poller(interval)
        if observe_interval is not None:
            observe_interval("slurm", interval)

    return pace


def _add_digest(config: Config, scheduler: AsyncIOScheduler, weekly_digest: AfterPoll) -> None:
    # At the configured time, and once at start-up to catch up on a digest missed while
    # skybot was down (the digest itself decides whether one is due).
    digest = config.digest
    scheduler.add_job(
        weekly_digest,
        CronTrigger(day_of_week=digest.weekday, hour=digest.hour),
        id="digest",
        name="weekly lab digest",
        misfire_grace_time=int(digest.catch_up_hours * 3600) or 1,
    )
    scheduler.add_job(weekly_digest, "date", run_date=datetime.now(), id="digest-catch-up")
