"""The Slurm poll interval stretches while polls are expensive and comes back when they are
cheap, and says so in the log and the metrics. A fake clock times the polls."""

from __future__ import annotations

import logging

import pytest
from msgspec.structs import replace

from bot.config import SlurmConfig, load_config
from scheduler.slurm.pacing import PollPacer
from tests.support.poll_schedule import schedule_for


def test_the_interval_grows_past_the_share_and_shrinks_back() -> None:
    pacer = PollPacer(base_seconds=15, max_share=0.25, max_seconds=45)
    assert pacer.observe(1.0) is None  # cheap: 15 s it stays
    assert pacer.observe(6.0) == 30.0  # 6 s is 40% of 15 s: 24 s wanted, with headroom
    assert pacer.observe(6.0) is None  # the same cost again: no flapping
    assert pacer.observe(20.0) == 45.0  # never past the most it may stretch to
    assert pacer.observe(1.0) == 15.0  # cheap again: back to the configured interval
    assert pacer.observe(3.5) is None  # 14 s wanted: never below the configured one


class _FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Polls:
    """Polls that take `cost` seconds of the fake clock."""

    def __init__(self, clock: _FakeClock) -> None:
        self.clock = clock
        self.cost = 0.0
        self.interval: float | None = None

    async def poll_jobs(self) -> bool:
        self.clock.now += self.cost
        return True

    poll_caps = poll_limits = poll = poll_jobs

    async def probe(self) -> bool:
        return False

    def set_interval(self, seconds: float) -> None:
        self.interval = seconds

    async def close(self) -> None:
        return None


async def _nothing() -> None:
    return None


async def test_the_schedule_stretches_the_slurm_poll_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _FakeClock()
    polls = _Polls(clock)
    intervals: list[tuple[str, float]] = []
    config = replace(load_config(None), slurm=SlurmConfig(poll_seconds=10, max_poll_share=0.25))
    schedule = schedule_for(
        config,
        polls,
        _nothing,
        observe_interval=lambda source, seconds: intervals.append((source, seconds)),
        clock=clock,
    )
    try:
        slurm = schedule.loops["slurm"]
        caplog.set_level(logging.INFO)
        polls.cost = 5.0  # half of the interval
        await slurm.work()
        assert slurm.progress.interval == 25.0
        assert ("slurm", 25.0) in intervals
        assert polls.interval == 25.0  # the poller plans its pending listings on it
        assert "over 25% of the poll interval: polling every 25 s" in caplog.text

        polls.cost = 0.5
        await slurm.work()
        assert slurm.progress.interval == 10.0
        assert intervals[-1] == ("slurm", 10.0)
        assert "cheap again: polling every 10 s" in caplog.text
    finally:
        await schedule.stop()
