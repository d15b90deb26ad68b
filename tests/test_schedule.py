"""The poll schedule's shutdown: polls still running are ended, quietly."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from bot.config import Config, load_config
from bot.service import poll_jobs
from scheduler.schedule import AfterPoll, PollHooks, PollSchedule, build_schedule


class _HangingPolls:
    """Polls that never finish on their own, as against a hung slurmctld."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.closed = False

    async def _hang(self) -> bool:
        self.started.set()
        await asyncio.Event().wait()
        return True

    poll_jobs = poll_caps = poll = _hang

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
    jobs = poll_jobs(config, polls, polls if storage is None else storage, refresh)
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
