"""Changes that leave a job pending show within `[slurm] pending_changes_seconds` where polls
read only job states (24.05+), and skybot's own actions show at the next poll, which they
bring forward. No cluster here (tests/test_pending_changes_cluster.py has the real one): the
24.11-like stand-in squeue of tests/test_poll_states_only.py, and a fake monotonic clock."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from bot.config import SlurmConfig, load_config
from core.runner_contract import RunnerReply, RunnerRequest
from scheduler.slurm.own_actions import refreshing_runner
from scheduler.slurm.pacing import pending_listing_due
from scheduler.slurm.pending_changes import PendingWatch, changed_since, pending_fingerprints
from scheduler.slurm.poller import SlurmPoller
from store.snapshots import load_snapshot
from store.writer import StoreWriter
from tests.support.cluster import wait_for
from tests.support.factories import CLUSTER
from tests.support.fake_squeue import _add_pending_jobs, _calls, _config, _fetches, _slurm
from tests.support.poll_schedule import schedule_for


def test_the_listing_runs_when_skipping_it_would_break_the_bound() -> None:
    # Polls every 15 s taking 1 s, bound 30 s: a change just after a listing must be in the
    # listing of the poll 15 or 30 s later, and shows 1 s after that poll starts.
    assert pending_listing_due(None, 15, 1, 30)  # none yet: the baseline
    assert not pending_listing_due(0.2, 15, 1, 30)  # a poll brought forward: 16.2 s
    assert not pending_listing_due(14, 15, 1, 30)  # the next poll would show it at 30 s
    assert pending_listing_due(15, 15, 1, 30)  # at the next poll it would be 31 s
    # Polls every 5 s: one listing in 5 polls keeps 30 s.
    due = []
    since = 0.0
    for _ in range(10):
        since += 5
        listed = pending_listing_due(since, 5, 0.3, 30)
        due.append(listed)
        since = 0.0 if listed else since
    assert due == [False, False, False, False, True] * 2
    # A bound below one interval: every poll, the best there is.
    assert pending_listing_due(15, 15, 1, 10) and pending_listing_due(0.1, 15, 1, 10)
    # A stretched interval (an expensive queue): sooner in polls, the same in seconds.
    assert pending_listing_due(0.5, 30, 1, 30)


def test_fingerprints_change_only_with_a_records_own_line() -> None:
    before = pending_fingerprints(b"12|kira-lab|kira-lab|1|\n13|hoffman-lab|x|2|\n")
    after = pending_fingerprints(b"13|hoffman-lab|x|2|\n12|overcap|overcap|1|\n14|a|b|\n")
    assert sorted(before) == ["12", "13"]
    # Moved, and new since the last listing (fetched when it appeared, maybe before a
    # change); the same line in another place is no change.
    assert sorted(changed_since(before, after)) == ["12", "14"]
    # A name with a newline in it stays within its own record.
    odd = pending_fingerprints(b"12|p|a|two\nlines|\n13|p|a|n|\n")
    assert sorted(odd) == ["12", "13"]
    assert odd["13"] == pending_fingerprints(b"13|p|a|n|\n")["13"]
    assert pending_fingerprints(b"") == {}


@dataclass
class _Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class _Fake:
    bin_dir: Path
    writer: StoreWriter
    poller: SlurmPoller
    clock: _Clock
    document: dict[str, Any]
    # The wall clock, which the poller backs off on.
    wall: _Clock

    def save(self) -> None:
        (self.bin_dir / "squeue.json").write_text(json.dumps(self.document))

    def pending_job(self, job_id: int) -> dict[str, Any]:
        return next(j for j in self.document["jobs"] if j["job_id"] == job_id)

    async def partition_of(self, job_id: int) -> str:
        jobs = (await self.writer.run(load_snapshot, CLUSTER)).jobs
        return next(job.partition for job in jobs if job.job_id == job_id)

    def listings(self) -> int:
        log = self.bin_dir / "listings.log"
        return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture
async def fake(tmp_path: Path) -> AsyncIterator[_Fake]:
    bin_dir = tmp_path / "bin"
    _slurm(bin_dir)
    writer = StoreWriter(tmp_path / "skybot.db")
    clock = _Clock()
    wall = _Clock(1_780_000_000.0)
    config = _config(tmp_path, bin_dir)
    # Polls every 15 s, changes within 30 s: the defaults.
    assert (config.slurm.poll_seconds, config.slurm.pending_changes_seconds) == (15, 30)
    poller = SlurmPoller(config.default_cluster, config, writer, clock=wall, monotonic=clock)
    document = json.loads((bin_dir / "squeue.json").read_text())
    try:
        yield _Fake(bin_dir, writer, poller, clock, document, wall)
    finally:
        await poller.close()
        writer.close()


async def test_a_pending_jobs_new_partition_shows_at_the_listing_the_bound_needs(
    fake: _Fake,
) -> None:
    """Job 12 pends in kira-lab; `scontrol update JobId=12 Partition=hoffman-lab
    Account=hoffman-lab` leaves it PENDING, so its state shows nothing. The poll that must
    list pending jobs' settings for the 30 s bound finds it and fetches job 12 alone."""
    assert await fake.poller.poll_jobs()
    assert fake.listings() == 1  # the first poll's: what later ones are compared with
    _calls(fake.bin_dir)
    job = fake.pending_job(12)
    job["partition"] = job["account"] = "hoffman-lab"
    fake.save()

    fake.clock.now += 5  # a poll brought forward: the next regular one is in time
    assert await fake.poller.poll_jobs()
    assert fake.listings() == 1 and _fetches(fake.bin_dir) == []
    assert await fake.partition_of(12) == "kira-lab"

    fake.clock.now += 15  # skipping this one would show the change only 35 s on
    assert await fake.poller.poll_jobs()
    assert fake.listings() == 2
    assert _fetches(fake.bin_dir) == ["12"]
    assert await fake.partition_of(12) == "hoffman-lab"

    # Just over half the bound: listed again; nothing changed since, nothing fetched.
    fake.clock.now += 16
    assert await fake.poller.poll_jobs()
    assert fake.listings() == 3 and _fetches(fake.bin_dir) == []


async def test_a_job_skybot_changed_is_fetched_by_the_next_poll(fake: _Fake) -> None:
    """A move to overcap through the runner leaves the job PENDING: marked changed, it is
    fetched by the very next poll, listing due or not; a poll that fails keeps the mark."""
    assert await fake.poller.poll_jobs()
    _calls(fake.bin_dir)
    job = fake.pending_job(12)
    job["partition"] = job["account"] = "overcap"
    fake.save()
    fake.poller.mark_changed("12")

    (fake.bin_dir / "down").touch()  # the fetch fails: the poll with it
    fake.clock.now += 1
    assert await fake.poller.poll_jobs() is False
    (fake.bin_dir / "down").unlink()
    _calls(fake.bin_dir)
    fake.wall.now += 60  # past the back-off

    fake.clock.now += 1
    assert await fake.poller.poll_jobs()
    assert _fetches(fake.bin_dir) == ["12"]
    assert fake.listings() == 1  # no listing needed for it
    assert await fake.partition_of(12) == "overcap"

    fake.clock.now += 1
    assert await fake.poller.poll_jobs()
    assert _fetches(fake.bin_dir) == []  # once read, no longer marked


async def test_settings_of_most_of_the_queue_changed_are_read_in_one_plain_read(
    fake: _Fake,
) -> None:
    """A partition going down changes every pending job's reason: rather than a `--jobs=`
    list as long as the queue, one plain read. A few changed are fetched by id."""
    _add_pending_jobs(fake.document, range(1000, 1030))
    fake.save()
    assert await fake.poller.poll_jobs()
    _calls(fake.bin_dir)
    fake.pending_job(1000)["partition"] = fake.pending_job(1001)["partition"] = "debug"
    fake.save()
    fake.clock.now += 30
    assert await fake.poller.poll_jobs()
    assert sorted(_calls(fake.bin_dir)) == sorted(
        ["--all --only-job-state --json", "--all --json --jobs=1000", "--all --json --jobs=1001"]
    )

    for job in fake.document["jobs"]:
        if job["job_state"] == ["PENDING"]:
            job["partition"] = "kira-lab"  # 35 of 42 jobs (12 was already)
    fake.save()
    fake.clock.now += 30
    assert await fake.poller.poll_jobs()
    assert _calls(fake.bin_dir) == ["--all --only-job-state --json", "--all --json"]
    assert await fake.partition_of(1029) == "kira-lab"


def _runner(replies: list[RunnerReply]) -> Any:
    async def call(user: str, request: RunnerRequest, /) -> RunnerReply:
        return replies.pop(0)

    return call


async def test_own_actions_mark_their_job_and_bring_the_poll_forward() -> None:
    marked: list[str] = []
    nudged: list[bool] = []
    replies: list[RunnerReply] = [
        {"ok": True, "job_id": "12", "partition": "overcap", "account": "overcap"},
        {"ok": True, "job_id": "316_4"},
        {"ok": False, "error": "Invalid job id specified"},
        {"ok": True, "lines": []},
    ]
    runner = refreshing_runner(_runner(replies), marked.append, lambda: nudged.append(True))
    move = {"action": "move-to-overcap", "job_id": "12", "partition": "overcap"}
    assert (await runner("alice", move))["ok"]
    await runner("alice", {"action": "cancel", "job_id": "316_4"})
    await runner("alice", {"action": "cancel", "job_id": "9"})  # refused: nothing changed
    await runner("alice", {"action": "tail", "path": "/x"})  # changes no job
    assert marked == ["12", "316_4"]
    assert nudged == [True, True]


class _Polls:
    """A Slurm poll that waits for `release` while `hold` is set; counts the polls."""

    def __init__(self) -> None:
        self.polls = 0
        self.hold = False
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.running = 0
        self.most_at_once = 0

    async def poll_jobs(self) -> bool:
        self.polls += 1
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        self.started.set()
        try:
            if self.hold:
                await self.release.wait()
        finally:
            self.running -= 1
        return True

    async def poll_caps(self) -> bool:
        return True

    poll = probe = poll_limits = poll_caps

    def set_interval(self, seconds: float) -> None:
        return None

    async def close(self) -> None:
        return None


async def _nothing() -> None:
    return None


# The loop's time is fake (looptime): a wait asserts on that clock, however slow the machine.
@pytest.mark.looptime
async def test_the_next_slurm_poll_is_brought_forward_even_during_a_poll() -> None:
    """Polls every 300 s: an action's poll comes at once, not minutes later, and one asked
    for while a poll runs comes right after it (APScheduler would skip a second instance)."""
    config = replace(load_config(None), slurm=SlurmConfig(poll_seconds=300))
    polls = _Polls()
    on_loop = {"in_thread": False, "clock": asyncio.get_running_loop().time}

    schedule = schedule_for(config, polls, _nothing)
    schedule.start()
    try:
        await wait_for(lambda: polls.polls == 1, 5, "the first poll, at start", 0.01, **on_loop)
        schedule.poll_slurm_soon()
        await wait_for(lambda: polls.polls == 2, 5, "the poll asked for", 0.01, **on_loop)

        polls.hold = True
        polls.started.clear()
        schedule.poll_slurm_soon()
        await asyncio.wait_for(polls.started.wait(), 5)
        schedule.poll_slurm_soon()  # during poll 3
        await asyncio.sleep(0.2)  # loop time, fast-forwarded: everything due by then has run
        assert polls.polls == 3
        polls.hold = False
        polls.release.set()
        await wait_for(
            lambda: polls.polls == 4, 5, "the poll asked for during poll 3", 0.01, **on_loop
        )
        assert polls.most_at_once == 1  # poll 4 waited for poll 3 to end
    finally:
        await schedule.stop()


def test_a_watch_forgets_nothing_when_its_poll_fails() -> None:
    clock = _Clock()
    watch = PendingWatch(30, 15, clock)
    started = watch.begin_poll()
    watch.listed(started, b"12|a|\n")
    watch.committed(started)
    watch.mark_changed("7")
    started = watch.begin_poll()
    watch.listed(started, b"12|b|\n")
    assert watch.to_fetch([]) == ["7", "12"]
    watch.failed()
    clock.now += 1
    started = watch.begin_poll()
    watch.listed(started, b"12|b|\n")
    assert watch.to_fetch(["7"]) == ["12"]  # already fetched for its state
    watch.committed(started)
    watch.begin_poll()
    assert watch.to_fetch([]) == []
