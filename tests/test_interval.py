"""Work on the monotonic clock (issue 28, item 1): the poll loops' ticks, noticing a wall-clock
step, and seeing a poller that stopped completing whatever the event loop's heartbeat says."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from bot import service
from bot.config import Config
from bot.metrics import Metrics
from bot.polling import poll_hooks, poll_jobs
from core.config_schema import parse_config
from scheduler.interval import ClockStepWatch, IntervalLoop, PollProgress, next_due
from scheduler.schedule import PollJob, build_schedule
from store.outbox import OutboxMessage, enqueue, outbox_rows, reschedule, shift_retries
from store.writer import StoreWriter


def test_a_run_longer_than_the_interval_skips_the_ticks_it_overran() -> None:
    assert next_due(100.0, 10.0, 103.0) == 110.0
    assert next_due(100.0, 10.0, 125.0) == 130.0  # not 110 and 120 at once
    assert next_due(100.0, 10.0, 110.0) == 120.0


@pytest.mark.looptime  # waits on a fake loop clock: exact, however busy the host
async def test_the_loop_runs_at_its_interval_on_the_loop_clock() -> None:
    runs: list[float] = []
    loop = asyncio.get_running_loop()

    async def work() -> None:
        runs.append(loop.time())

    task = asyncio.create_task(IntervalLoop(PollProgress("x", 0.1, 0.0), work).run())
    await asyncio.sleep(0.55)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert len(runs) == 6  # at 0, 0.1, ... 0.5
    gaps = [b - a for a, b in itertools.pairwise(runs)]
    assert all(gap == pytest.approx(0.1) for gap in gaps), gaps


@pytest.mark.looptime  # waits on a fake loop clock: exact, however busy the host
async def test_a_failing_run_is_logged_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runs = 0

    async def work() -> None:
        nonlocal runs
        runs += 1
        raise RuntimeError("boom")

    progress = PollProgress("x", 0.05, 0.0)
    task = asyncio.create_task(IntervalLoop(progress, work).run())
    await asyncio.sleep(0.22)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert runs == 5  # at 0, 0.05, ... 0.2
    assert progress.completed_at is not None  # a failed run still completed
    assert "x poll failed" in caplog.text


def test_a_step_of_the_wall_clock_is_noticed_once_a_slew_never() -> None:
    wall, mono = [1000.0], [50.0]
    watch = ClockStepWatch(lambda: wall[0], lambda: mono[0])
    wall[0], mono[0] = 1001.0, 51.0
    assert watch.step() is None
    wall[0], mono[0] = 1002.0 - 3600, 52.0  # NTP steps it back an hour
    assert watch.step() == pytest.approx(-3600.0)
    wall[0], mono[0] = 1003.0 - 3600, 53.0
    assert watch.step() is None
    wall[0], mono[0] = 1004.5 - 3600, 54.0  # slewed half a second
    assert watch.step() is None


def test_a_poll_is_late_after_its_intervals_and_grace_counted_from_its_last_completion() -> None:
    progress = PollProgress("slurm", 15.0, 20.0, started_at=1000.0)
    assert progress.late_by(1079.0, 4) is None  # 4 x 15 + 20 = 80 s
    assert progress.late_by(1081.0, 4) == 81.0
    assert "has not completed for 81 s (every 15 s)" in progress.describe_late(81.0)
    progress.completed_at = 1070.0
    assert progress.late_by(1081.0, 4) is None


class _OneClusterStuck:
    """Two clusters' polls: "nova"'s Slurm poll hangs on its first run (as on a SIGSTOPped
    poll worker), every other poll completes at once."""

    def __init__(self) -> None:
        self.runs = {"skynet": 0, "nova": 0}
        self.cancelled = 0

    def polls(self, config: Config) -> list[PollJob]:
        jobs = []
        for name in ("skynet", "nova"):
            cluster = config.cluster_named(name)
            assert cluster is not None
            poller = _Poller(self, name)
            default = name == "skynet"
            jobs += poll_jobs(cluster, config, poller, poller, _refresh, default=default)  # type: ignore[arg-type]
        return jobs


class _Poller:
    def __init__(self, polls: _OneClusterStuck, cluster: str) -> None:
        self._polls, self._cluster = polls, cluster

    async def poll_jobs(self) -> bool:
        self._polls.runs[self._cluster] += 1
        if self._cluster == "nova" and self._polls.runs["nova"] == 1:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self._polls.cancelled += 1
                raise
        return True

    async def _done(self) -> bool:
        return True

    poll_caps = poll_limits = poll = probe = _done

    def set_interval(self, seconds: float) -> None:
        return None


async def _refresh() -> None:
    return None


@pytest.mark.looptime  # waits on a fake loop clock: exact, however busy the host
async def test_a_stuck_poll_is_one_clusters_it_is_restarted_inside_and_the_watchdog_stays_fed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The heartbeat goes on (the loop is fine); only nova's Slurm poll is stuck. Before, it
    failed every cluster's readiness and starved the watchdog, so systemd would restart the
    healthy cluster's bot too."""
    slurm = {"poll_seconds": 0.1, "caps_poll_seconds": 0.1, "command_timeout_seconds": 0.1}
    config = parse_config(
        {
            "metrics": {"stale_after_polls": 2.0},
            "storage": {"poll_seconds": 0.1},
            "clusters": [{"name": "skynet", "slurm": slurm}, {"name": "nova", "slurm": slurm}],
        }
    )
    fed: list[str] = []
    monkeypatch.setattr(service, "notify", fed.append)
    polls = _OneClusterStuck()
    jobs = polls.polls(config)
    schedule = build_schedule(jobs, poll_hooks(config, Metrics(), _Writer(), [], jobs))  # type: ignore[arg-type]
    beat = service._feed_watchdog(_Writer(), _Sender())  # type: ignore[arg-type]
    schedule.start(restart_after_intervals=2 * 2.0)
    try:
        await asyncio.sleep(0.4)  # 2 x 0.1 + 0.1 = 0.3 s: nova's poll is late for readiness
        late = service.late_polls(config, schedule, "nova")
        assert any("the slurm@nova poll has not completed for" in line for line in late), late
        assert service.late_polls(config, schedule, "skynet") == []
        beat()
        # 2 x 2 x 0.1 + 0.1 = 0.5 s: stuck; abandoned at the next check (each second), run again
        await asyncio.sleep(0.7)
        beat()
        assert fed == ["WATCHDOG=1"] * 2  # the process works: systemd leaves it alone
        assert schedule.restarts == {"slurm@nova": 1}, (schedule.restarts, polls.runs)
        assert polls.cancelled == 1 and polls.runs["nova"] >= 2
        assert schedule.restarts == {"slurm@nova": 1}
        assert "the slurm@nova poll of cluster nova has been running for" in caplog.text
        await asyncio.sleep(0.3)
        assert service.late_polls(config, schedule, "nova") == []  # current again
        assert polls.runs["skynet"] >= 13  # skynet's polls never waited
    finally:
        await schedule.stop()


class _Writer:
    busy_since: float | None = None

    def check_file(self) -> None:
        return None


class _Sender:
    pass_since: float | None = None


def test_the_watchdog_starves_on_a_stuck_writer_or_sender_not_on_a_poll(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fed: list[str] = []
    monkeypatch.setattr(service, "notify", fed.append)
    writer, sender = _Writer(), _Sender()
    beat = service._feed_watchdog(writer, sender)  # type: ignore[arg-type]
    beat()
    now = time.monotonic()
    writer.busy_since = now - service.WRITER_STUCK_SECONDS - 1
    beat()
    assert fed == ["WATCHDOG=1"]
    assert "database writer" in service.process_stuck(writer, sender)[0]  # type: ignore[arg-type]
    writer.busy_since = None
    sender.pass_since = now - service.SENDER_STUCK_SECONDS - 1
    beat()
    assert fed == ["WATCHDOG=1"]
    sender.pass_since = None
    beat()
    assert fed == ["WATCHDOG=1"] * 2


async def test_a_step_back_keeps_what_a_queued_retry_had_left(writer: StoreWriter) -> None:
    now = time.time()
    await writer.run(enqueue, [OutboxMessage("k", "U1", "hi"), OutboxMessage("n", "U2", "x")], now)
    (waiting, fresh) = await writer.run(outbox_rows)
    await writer.run(reschedule, waiting["id"], now + 30, "http 500")
    stepped = now - 3600  # the clock was stepped back an hour
    # A message queued after the step, at the new time, stays as it is.
    await writer.run(reschedule, fresh["id"], stepped, "ratelimited")
    assert await writer.run(shift_retries, stepped, -3600.0) == 1
    rows = {row["key"]: row for row in await writer.run(outbox_rows)}
    assert rows["k"]["next_attempt_at"] == pytest.approx(stepped + 30)
    assert rows["n"]["next_attempt_at"] == pytest.approx(stepped)
