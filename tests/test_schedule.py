"""The poll schedule's shutdown: polls still running are ended, quietly."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.config import load_config
from scheduler.schedule import build_scheduler


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


async def test_stop_ends_running_polls_without_logging_them_as_failures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    polls = _HangingPolls()
    schedule = build_scheduler(load_config(None), polls, polls, _refresh)  # type: ignore[arg-type]
    caplog.set_level(logging.DEBUG)
    schedule.start()
    await asyncio.wait_for(polls.started.wait(), 10)
    assert schedule.in_flight

    await asyncio.wait_for(schedule.stop(), 10)
    await asyncio.sleep(0.1)  # APScheduler reports a job's outcome from a done-callback

    assert not schedule.in_flight
    assert polls.closed  # the Slurm poll worker is stopped with the pollers
    failures = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert failures == []
