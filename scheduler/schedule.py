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

from bot.config import Config
from scheduler.slurm_poller import SlurmPoller
from scheduler.storage_poller import StoragePoller

log = logging.getLogger(__name__)

AfterPoll = Callable[[], Awaitable[object]]
# (source, seconds): how long one poll took, for the metrics.
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

    def start(self) -> None:
        self.scheduler.start()

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
    weekly_digest: AfterPoll | None = None,
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

    def then_refresh(
        source: str, poll: Callable[[], Awaitable[bool]], watch: AfterPoll | None = None
    ) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            task = asyncio.current_task()
            if task is not None:
                schedule.in_flight.add(task)
            try:
                started = time.perf_counter()
                await poll()
                if observe is not None:
                    observe(source, time.perf_counter() - started)
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
                schedule.in_flight.discard(task)  # type: ignore[arg-type]

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
