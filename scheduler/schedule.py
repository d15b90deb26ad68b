"""The time-driven side of skybot, in the bot's event loop, as data.

The composition root (bot/service.py) says what runs when: a list of `PollJob`s (a name, an
interval, the poll, and what follows each completed run) and a list of `CalendarJob`s; then
`build_schedule` turns them into one `PollSchedule`. Another cluster's polls are more entries
in the list, not another parameter.

Polls run on the monotonic clock (scheduler/interval.py): a wall-clock step in either
direction changes nothing about when they run. APScheduler keeps only what is meant by the
calendar, the weekly digest; after a wall-clock step it is woken to look at its calendar
again, and the digest's outbox keys (one per lab, channel and week) make a second run for
the same week enqueue nothing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger

from core.cluster_config import SlurmConfig
from scheduler.interval import ClockStepWatch, IntervalLoop, PollProgress
from scheduler.log_cluster import name_clusters_in_logs
from scheduler.slurm.pacing import PollPacer
from store.health import is_store_fault

log = logging.getLogger(__name__)

AfterPoll = Callable[[], Awaitable[object]]
# (source, seconds): how long one poll took, for the metrics; and the interval polls run at.
ObservePoll = Callable[[str, float], None]
# Told how far the wall clock jumped (seconds, negative: back).
OnClockStep = Callable[[float], None]

# How often the wall clock is compared with the monotonic one.
CLOCK_CHECK_SECONDS = 1.0
# The poll that `poll_slurm_soon` brings forward.
SLURM_POLL = "slurm"


@dataclass(frozen=True)
class Pacing:
    """A poll's interval, stretched while its polls are expensive, and who else is told."""

    pacer: PollPacer
    on_interval: Callable[[float], None] | None = None


@dataclass(frozen=True)
class PollJob:
    """One poll, repeated every `seconds` of monotonic time, one run at a time."""

    name: str
    seconds: float
    poll: Callable[[], Awaitable[object]]
    # Run in this order after each poll that completed: the snapshot cache's refresh first,
    # then the watchers, so that they see the snapshot just written.
    then: tuple[AfterPoll, ...] = ()
    # Stretches the interval while polls are expensive (the Slurm poll's share of the
    # controller), and who else plans on the interval.
    pacing: Pacing | None = None
    # The cluster it polls: its readiness, metrics and log lines are that cluster's. Every
    # poll is some cluster's, so it has no default: a poll cannot be added without it.
    cluster: str = field(kw_only=True)


@dataclass(frozen=True)
class CalendarJob:
    """Work at calendar times (APScheduler's trigger on the wall clock), and once at start-up
    to catch up on a run missed while skybot was down (the work decides whether one is due)."""

    name: str
    run: AfterPoll
    trigger: BaseTrigger
    misfire_grace_seconds: int
    catch_up_at_start: bool = True


@dataclass(frozen=True)
class PollHooks:
    """What every poll reports to, and what ends the pollers' own processes at shutdown."""

    # How long one poll may take on top of its interval before it is late (the Slurm
    # command timeout): an outage makes polls fail, not stop completing.
    grace_seconds: float
    observe: ObservePoll | None = None
    observe_interval: ObservePoll | None = None
    # After every poll attempt, failed or not (the database file's identity check).
    after_each: Callable[[], object] | None = None
    close_pollers: Callable[[], Awaitable[None]] | None = None
    clock: Callable[[], float] = time.perf_counter


@dataclass
class PollSchedule:
    """The poll loops, the calendar, and the polls running right now: shutdown ends those
    instead of abandoning them (and their Slurm client processes) to a closed loop."""

    scheduler: AsyncIOScheduler
    hooks: PollHooks
    loops: dict[str, IntervalLoop] = field(default_factory=dict)
    in_flight: set[asyncio.Task[None]] = field(default_factory=set)
    on_clock_step: list[OnClockStep] = field(default_factory=list)
    stopping: bool = False
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _loop_tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _abandoned: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def restarts(self) -> dict[str, int]:
        """How many times each poll was abandoned as stuck and started again (if it was)."""
        return {name: loop.restarts for name, loop in self.loops.items() if loop.restarts}

    @property
    def progress(self) -> dict[str, PollProgress]:
        return {source: loop.progress for source, loop in self.loops.items()}

    def late_polls(self, now: float, intervals: float, cluster: str | None = None) -> list[str]:
        """Each poller (of `cluster`, if given) that has not completed within `intervals`
        intervals (plus its command timeout), said in words; `now` is `loop.time()`."""
        late = []
        for progress in self.progress.values():
            if cluster is not None and self.loops[progress.source].cluster != cluster:
                continue
            silent = progress.late_by(now, intervals)
            if silent is not None:
                late.append(progress.describe_late(silent))
        return late

    def poll_soon(self, name: str) -> None:
        """Bring the poll `name` forward to now (right after the running one, if one runs)."""
        loop = self.loops.get(name)
        if loop is not None and not self.stopping:
            loop.run_soon()

    def poll_slurm_soon(self) -> None:
        """skybot just changed a job: its user should see that at once, not a poll later."""
        self.poll_soon(SLURM_POLL)

    def start(self, restart_after_intervals: float | None = None) -> None:
        """Start every poll loop. A run that has taken `restart_after_intervals` intervals
        (plus the grace) is stuck: it is abandoned (cancelled, its Slurm client processes
        killed) and its loop started again, inside the bot, so one cluster's stuck poll
        neither starves the others nor gets the process restarted. None: never."""
        name_clusters_in_logs()
        self.scheduler.start()
        now = asyncio.get_running_loop().time()
        for source, loop in self.loops.items():
            loop.progress.started_at = now
            self._loop_tasks[source] = asyncio.create_task(loop.run(), name=f"poll-{source}")
        self._tasks.append(asyncio.create_task(self._watch_clock(), name="clock-steps"))
        if restart_after_intervals is not None:
            watch = self._watch_stuck(restart_after_intervals)
            self._tasks.append(asyncio.create_task(watch, name="stuck-polls"))

    def restart_stuck(self, now: float, intervals: float) -> list[str]:
        """Abandon each poll whose run has taken more than `intervals` intervals (plus the
        grace), or whose loop ended, and start its loop again; the names restarted."""
        restarted = []
        for source, task in list(self._loop_tasks.items()):
            if self.stopping:
                break
            interval_loop = self.loops[source]
            progress = interval_loop.progress
            running = progress.stuck_for(now, intervals)
            if running is None and not task.done():
                continue
            what = "ended" if running is None else f"has been running for {running:.0f} s"
            log.error(
                "the %s poll%s %s: abandoned and started again; the other polls go on",
                source,
                f" of cluster {interval_loop.cluster}" if interval_loop.cluster else "",
                what,
            )
            # Cancelling it ends its Slurm client processes (its poll worker is killed); one
            # that ignores the cancel is left behind, never waited for.
            task.cancel()
            self._abandoned.add(task)
            task.add_done_callback(self._abandoned.discard)
            progress.running_since = None
            interval_loop.restarts += 1
            self._loop_tasks[source] = asyncio.create_task(
                interval_loop.run(), name=f"poll-{source}"
            )
            restarted.append(source)
        return restarted

    async def _watch_stuck(self, intervals: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(CLOCK_CHECK_SECONDS)
            self.restart_stuck(loop.time(), intervals)

    async def run_poll(self, job: PollJob) -> None:
        """One run of `job` and what follows it; a failing store is said once by its health,
        anything else is the loop's to log."""
        task = asyncio.current_task()
        if task is not None:
            self.in_flight.add(task)
        try:
            started = self.hooks.clock()
            await job.poll()
            self._observe(job, self.hooks.clock() - started)
            for then in job.then:
                await then()
        except asyncio.CancelledError:
            # Ended by stop(): not a failure, and it ends the poll's loop too.
            if self.stopping:
                log.debug("%s poll ended: skybot is stopping", job.name)
            raise
        except Exception as error:
            if not is_store_fault(error):
                raise
            log.debug("%s poll: the database is failing: %s", job.name, error)
        finally:
            self.in_flight.discard(task)
            if self.hooks.after_each is not None:
                self.hooks.after_each()

    def _observe(self, job: PollJob, took: float) -> None:
        if self.hooks.observe is not None:
            self.hooks.observe(job.name, took)
        if job.pacing is None:
            return
        pacer = job.pacing.pacer
        interval = pacer.observe(took)
        if interval is None:
            return
        if interval > pacer.base_seconds:
            log.warning(
                "%s poll took %.1f s, over %.0f%% of the poll interval: polling every %.0f s",
                job.name,
                took,
                100 * pacer.max_share,
                interval,
            )
        else:
            log.info("%s polls are cheap again: polling every %.0f s", job.name, interval)
        self.loops[job.name].progress.interval = interval
        if job.pacing.on_interval is not None:
            job.pacing.on_interval(interval)
        if self.hooks.observe_interval is not None:
            self.hooks.observe_interval(job.name, interval)

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
                self._say_calendar()
            for listener in self.on_clock_step:
                listener(moved)

    def _say_calendar(self) -> None:
        """When each calendar job runs next, by the clock as it now is (due now: at once)."""
        for job in self.scheduler.get_jobs():
            when = job.next_run_time
            log.info(
                "%s: next run %s",
                job.name,
                "none" if when is None else when.strftime("%Y-%m-%d %H:%M:%S %Z"),
            )

    async def stop(self) -> None:
        self.stopping = True
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        tasks = [*self._tasks, *self._loop_tasks.values(), *self.in_flight]
        for task in [*tasks, *self._abandoned]:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._loop_tasks.clear()
        if self.hooks.close_pollers is not None:
            await self.hooks.close_pollers()


def build_schedule(
    polls: Sequence[PollJob], hooks: PollHooks, calendar: Sequence[CalendarJob] = ()
) -> PollSchedule:
    """One instance of each job at a time; a late run is coalesced, never queued up."""
    scheduler = AsyncIOScheduler(job_defaults={"max_instances": 1, "coalesce": True})
    schedule = PollSchedule(scheduler, hooks)
    for job in polls:
        if hooks.observe_interval is not None:
            hooks.observe_interval(job.name, job.seconds)
        progress = PollProgress(job.name, job.seconds, hooks.grace_seconds)
        work = functools.partial(schedule.run_poll, job)
        schedule.loops[job.name] = IntervalLoop(progress, work, job.cluster)
    for entry in calendar:
        scheduler.add_job(
            entry.run,
            entry.trigger,
            id=entry.name,
            name=entry.name,
            misfire_grace_time=entry.misfire_grace_seconds,
        )
        if entry.catch_up_at_start:
            # Added now, started later: with APScheduler's default grace of 1 s, a slow
            # start-up (a busy host) skipped the catch-up run as "missed".
            scheduler.add_job(
                entry.run,
                "date",
                run_date=datetime.now(),
                id=f"{entry.name}-catch-up",
                misfire_grace_time=None,
            )
    return schedule


def slurm_pacer(slurm: SlurmConfig, stale_after_polls: float) -> PollPacer:
    """A cluster's Slurm poll interval (its [slurm]), stretched while a poll costs over
    `max_poll_share` of it."""
    return PollPacer(
        base_seconds=slurm.poll_seconds,
        max_share=slurm.max_poll_share,
        # Never so long that /readyz would call the snapshot stale between two polls.
        max_seconds=slurm.poll_seconds * max(1.0, stale_after_polls - 1),
    )
