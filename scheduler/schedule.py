"""The time-driven side of skybot: every poller on one APScheduler, in the bot's event loop."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger

from core.config_schema import Config
from scheduler.poll_pacing import PollPacer
from scheduler.slurm_poller import SlurmPoller
from scheduler.storage_poller import StoragePoller

log = logging.getLogger(__name__)

AfterPoll = Callable[[], Awaitable[object]]
# (source, seconds): how long one poll took, for the metrics; and the interval polls run at.
ObservePoll = Callable[[str, float], None]


@dataclass
class PollSchedule:
    """The APScheduler running the polls, and the polls running right now: shutdown ends
    those instead of abandoning them (and their Slurm client processes) to a closed loop."""

    scheduler: AsyncIOScheduler
    # Ends what the pollers keep running between polls (the Slurm poll worker).
    close_pollers: Callable[[], Awaitable[None]] | None = None
    in_flight: set[asyncio.Task[None]] = field(default_factory=set)
    stopping: bool = False
    slurm_polling: bool = False
    # Asked for while a Slurm poll ran: another one as soon as it ends.
    slurm_poll_again: bool = False

    def start(self) -> None:
        self.scheduler.start()

    def poll_slurm_soon(self) -> None:
        """Bring the next Slurm poll forward to now (after the running one, if one runs):
        skybot just changed a job, and its user should see that at once."""
        if self.stopping:
            return
        if self.slurm_polling:
            self.slurm_poll_again = True
            return
        if self.scheduler.get_job("slurm") is not None:
            self.scheduler.modify_job("slurm", next_run_time=datetime.now())

    def slurm_poll_ended(self, _: object = None) -> None:
        self.slurm_polling = False
        if self.slurm_poll_again:
            self.slurm_poll_again = False
            self.poll_slurm_soon()

    async def stop(self) -> None:
        self.stopping = True
        self.scheduler.shutdown(wait=False)
        running = list(self.in_flight)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        if self.close_pollers is not None:
            await self.close_pollers()


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
    clock: Callable[[], float] = time.perf_counter,
) -> PollSchedule:
    """One instance of each poll at a time; a late run is coalesced, never queued up.

    `after_poll` (the snapshot cache refresh) runs after every poll; `after_slurm` and
    `after_storage` (the watchers) run after it, so they see the snapshot just written.
    """
    scheduler = AsyncIOScheduler(
        job_defaults={
            "max_instances": 1,
            "coalesce": True,
        }
    )
    schedule = PollSchedule(scheduler, close_pollers=slurm.close)
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
        scheduler.reschedule_job("slurm", trigger="interval", seconds=interval)
        slurm.set_interval(interval)
        if observe_interval is not None:
            observe_interval("slurm", interval)

    def then_refresh(
        source: str, poll: Callable[[], Awaitable[bool]], watch: AfterPoll | None = None
    ) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            task = asyncio.current_task()
            if task is not None:
                schedule.in_flight.add(task)
            if source == "slurm" and task is not None:
                # Until APScheduler has seen this run end (its own done-callback, added
                # before this one) it would skip a run brought forward.
                schedule.slurm_polling = True
                task.add_done_callback(schedule.slurm_poll_ended)
            try:
                started = clock()
                await poll()
                took = clock() - started
                if observe is not None:
                    observe(source, took)
                if source == "slurm":
                    pace(took)
                await after_poll()
                if watch is not None:
                    await watch()
            except asyncio.CancelledError:
                # Ended by stop(): not a failure, and APScheduler would log it as one (with
                # a traceback, at ERROR). Any other cancellation is passed on.
                if not schedule.stopping:
                    raise
                log.debug("%s poll ended: skybot is stopping", source)
            finally:
                schedule.in_flight.discard(task)

        return run

    polls = (
        (
            "slurm",
            "poll squeue/sinfo/sacct",
            slurm.poll_jobs,
            config.slurm.poll_seconds,
            after_slurm,
        ),
        (
            "caps",
            "poll sacctmgr associations",
            slurm.poll_caps,
            config.slurm.caps_poll_seconds,
            None,
        ),
        (
            "storage",
            "poll disk-usage reports and filesystems",
            storage.poll,
            config.storage.poll_seconds,
            after_storage,
        ),
    )
    now = datetime.now()
    if observe_interval is not None:
        for source, _, _, seconds, _ in polls:
            observe_interval(source, seconds)
    for source, name, poll, seconds, watch in polls:
        scheduler.add_job(
            then_refresh(source, poll, watch),
            "interval",
            seconds=seconds,
            id=source,
            name=name,
            next_run_time=now,
            # Late by more than one interval: skip it, the next run is as good.
            misfire_grace_time=max(1, int(seconds)),
        )
    if weekly_digest is not None:
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
        scheduler.add_job(weekly_digest, "date", run_date=now, id="digest-catch-up")
    return schedule
