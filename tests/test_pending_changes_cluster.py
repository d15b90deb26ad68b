"""On the real cluster, with the real poll schedule running: a pending job changed by
`scontrol update` (it stays PENDING) shows in the snapshot within
`[slurm] pending_changes_seconds`, and skybot's own actions through the real runner show at
once, long before the next regular poll.

On 24.11 polls read only job states, and such a change used to wait for the full read every
20th poll; on 22.05 every poll reads every record, so there the same tests prove nothing
slowed down."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from msgspec.structs import replace

from bot.cluster_wing import runner_call
from bot.config import DatabaseConfig, SlurmConfig, load_config
from core.records import Job
from core.runner_contract import RunnerCall, move_to_overcap_request
from scheduler.schedule import PollSchedule
from scheduler.slurm.own_actions import refreshing_runner
from scheduler.slurm.poller import SlurmPoller
from store.reader import SnapshotCache
from store.writer import StoreWriter
from tests.support.cluster import as_user, sbatch_async, wait_for
from tests.support.poll_schedule import schedule_for

pytestmark = pytest.mark.cluster

HELD = ("-p", "hoffman-lab", "-A", "hoffman-lab", "--hold", "--chdir=/tmp", "-o", "/dev/null")


class _NoStorage:
    async def poll(self) -> bool:
        return True


@dataclass
class Bot:
    """skybot's polling half as `skybot run` wires it: the schedule, the poller, the view
    commands answer from, and the runner that tells the poller what it changed."""

    schedule: PollSchedule
    cache: SnapshotCache
    runner: RunnerCall
    polls: list[float]

    def job(self, job_id: int) -> Job | None:
        return self.cache.current().jobs_by_id.get(job_id)

    async def shows(self, job_id: int, check: Callable[[Job], bool], timeout: float) -> float:
        """Seconds until the view shows `job_id` passing `check` (fails after `timeout`)."""
        started = time.monotonic()

        def now_shown() -> bool:
            job = self.job(job_id)
            return job is not None and check(job)

        await wait_for(now_shown, timeout, f"job {job_id} to show the change", interval=0.1)
        return time.monotonic() - started


async def _running_bot(tmp_path: Path, poll_seconds: float, bound: float) -> AsyncIterator[Bot]:
    slurm = SlurmConfig(
        poll_seconds=poll_seconds, pending_changes_seconds=bound, command_timeout_seconds=20
    )
    config = replace(
        load_config(None),
        slurm=slurm,
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
    )
    writer = StoreWriter(config.database.path)
    cache = SnapshotCache(config.database.path, config.default_cluster.name, config.labs)
    poller = SlurmPoller(config.default_cluster, config, writer)
    polls: list[float] = []

    async def refresh() -> None:
        await cache.refresh()
        polls.append(time.monotonic())

    schedule = schedule_for(config, poller, refresh, _NoStorage())
    runner = refreshing_runner(
        runner_call(config, config.default_cluster), poller.mark_changed, schedule.poll_slurm_soon
    )
    schedule.start()
    try:
        yield Bot(schedule, cache, runner, polls)
    finally:
        await schedule.stop()
        cache.close()
        writer.close()


@pytest.fixture
async def quick_bound(tmp_path: Path, clean_queue: None) -> AsyncIterator[Bot]:
    # Polls every 4 s, changes within 10 s; the full read on 24.x every 20 polls is 80 s.
    async for bot in _running_bot(tmp_path, poll_seconds=4, bound=10):
        yield bot


async def test_a_pending_jobs_scontrol_update_shows_within_the_bound(quick_bound: Bot) -> None:
    bot = quick_bound
    job_id = await sbatch_async("alice", *HELD, "--wrap", "sleep 300")
    await bot.shows(job_id, lambda job: job.state == "PENDING", 30)

    # As alice: her job to overcap's partition and account (what the button does by hand).
    await asyncio.to_thread(
        as_user,
        "alice",
        "scontrol",
        "update",
        f"JobId={job_id}",
        "Partition=overcap",
        "Account=overcap",
    )
    moved = await bot.shows(
        job_id, lambda job: (job.partition, job.account) == ("overcap", "overcap"), 60
    )
    # As root: a time limit; hold and release are state changes any poll sees.
    subprocess.run(["scontrol", "update", f"JobId={job_id}", "TimeLimit=45"], check=True)
    limit = await bot.shows(job_id, lambda job: job.time_limit_minutes == 45, 60)
    print(f"\npartition and account shown after {moved:.1f} s, time limit after {limit:.1f} s")
    job = bot.job(job_id)
    assert job is not None and job.state == "PENDING"
    assert moved <= 10 and limit <= 10, (moved, limit)


@pytest.fixture
async def slow_polls(
    tmp_path: Path, clean_queue: None, checkout_runner: None
) -> AsyncIterator[Bot]:
    # Polls every 60 s, and no listing of pending jobs within the test.
    async for bot in _running_bot(tmp_path, poll_seconds=60, bound=600):
        yield bot


async def test_skybots_own_move_and_cancel_show_at_once(slow_polls: Bot) -> None:
    bot = slow_polls
    moving = await sbatch_async("alice", *HELD, "--wrap", "sleep 300")
    cancelling = await sbatch_async("alice", *HELD, "--wrap", "sleep 300")
    # The first poll runs at start; on 24.x, a job submitted after it is fetched by id.
    await bot.shows(moving, lambda job: job.state == "PENDING", 90)
    await bot.shows(cancelling, lambda job: job.state == "PENDING", 90)

    request = move_to_overcap_request(str(moving), "overcap", "overcap")
    reply = await bot.runner("alice", request)
    assert reply["ok"], reply
    moved = await bot.shows(moving, lambda job: job.partition == "overcap", 30)

    reply = await bot.runner("alice", {"action": "cancel", "job_id": str(cancelling)})
    assert reply["ok"], reply
    started = time.monotonic()

    def no_longer_pending() -> bool:
        job = bot.job(cancelling)
        return job is None or job.state != "PENDING"

    await wait_for(no_longer_pending, 30, "the cancel to show", interval=0.1)
    cancelled = time.monotonic() - started
    print(f"\nmove shown after {moved:.1f} s, cancel after {cancelled:.1f} s (polls every 60 s)")
    assert moved < 5 and cancelled < 5, (moved, cancelled)
