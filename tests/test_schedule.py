"""The poll schedule's shutdown: polls still running are ended, quietly."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime, tzinfo
from typing import Any

import pytest
from apscheduler.triggers.cron import CronTrigger

from bot.config import Config, load_config
from bot.polling import poll_jobs
from scheduler import schedule as schedule_module
from scheduler.schedule import AfterPoll, CalendarJob, PollHooks, PollSchedule, build_schedule


class _HangingPolls:
    """Polls that never finish on their own, as against a hung slurmctld."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.closed = False

    async def _hang(self) -> bool:
        self.started.set()
        await asyncio.Event().wait()
        return True

    poll_jobs = poll_caps = poll_limits = poll = probe = _hang

    def set_interval(self, seconds: float) -> None:
        return None

    async def close(self) -> None:
        self.closed = True


async def _refresh() -> None:
    return None


def schedule_for(
    config: Config, polls: Any, refresh: AfterPoll = _refresh, storage: Any = None, **hooks: Any
) -> PollSchedule:
    """skybot's polls as `skybot run` lists them; `polls` stands in for the storage poller too
    unless `storage` is given."""
    hooks.setdefault("grace_seconds", config.slurm.command_timeout_seconds)
    hooks.setdefault("close_pollers", polls.close)
    storage = polls if storage is None else storage
    jobs = poll_jobs(config.default_cluster, config, polls, storage, refresh)
    return build_schedule(jobs, PollHooks(**hooks))


async def test_stop_ends_running_polls_without_logging_them_as_failures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    polls = _HangingPolls()
    schedule = schedule_for(load_config(None), polls)
    caplog.set_level(logging.DEBUG)
    schedule.start()
    await asyncio.wait_for(polls.started.wait(), 10)
    assert schedule.in_flight

    # Its polls' tasks have ended (and said whatever they say about it) when stop() returns.
    await asyncio.wait_for(schedule.stop(), 10)

    assert not schedule.in_flight
    assert polls.closed  # the Slurm poll worker is stopped with the pollers
    failures = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert failures == []


class _TenSecondsAgo(datetime):
    """`datetime.now()` as it was 10 s ago: a calendar built that long before it started."""

    @classmethod
    def now(cls, tz: tzinfo | None = None) -> _TenSecondsAgo:
        return cls.fromtimestamp(time.time() - 10, tz)


async def test_the_start_up_catch_up_runs_however_slow_the_start_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It is added when the schedule is built and runs once the scheduler starts: a start-up
    slower than APScheduler's default grace of 1 s skipped it as "missed"."""
    ran = asyncio.Event()

    async def catch_up() -> None:
        ran.set()

    monkeypatch.setattr(schedule_module, "datetime", _TenSecondsAgo)
    weekly = CalendarJob("digest", catch_up, CronTrigger(day_of_week="mon", hour=9), 3600)
    schedule = build_schedule([], PollHooks(grace_seconds=1.0), [weekly])
    schedule.start()
    try:
        await asyncio.wait_for(ran.wait(), 10)
    finally:
        await schedule.stop()
