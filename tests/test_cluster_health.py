"""Health per cluster (issue 38): /readyz lists every cluster's checks, /metrics labels every
Slurm and storage figure by cluster, and one cluster's outage fails only its own checks.

Before, a second cluster's outage was invisible (/readyz 200, no figure for it), and a stuck
second poller failed the whole bot's readiness.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from bot.health import ClusterHealth, Heartbeat, ServiceStatus
from bot.logs import JsonLines
from bot.metrics import Metrics, metrics_app
from core.view import ClusterView
from scheduler.interval import IntervalLoop, PollProgress
from scheduler.log_cluster import name_clusters_in_logs
from store.snapshots import load_snapshot, mark_success, record_poll_failure
from store.writer import StoreWriter
from tests.support.factories import LABS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _status(writer: StoreWriter, views: dict[str, ClusterView], late: list[str]) -> ServiceStatus:
    def health(name: str) -> ClusterHealth:
        return ClusterHealth(
            name,
            lambda: views[name],
            max_age_seconds=60.0,
            late_polls=lambda: late if name == "nova" else [],
            restarts=lambda: {"slurm@nova": 2} if name == "nova" else {},
        )

    return ServiceStatus(
        clusters=[health("skynet"), health("nova")],
        sender_pause=lambda: None,
        heartbeat=Heartbeat(),
        slack=None,
        store=writer.health,
    )


@pytest.fixture
async def two_views(tmp_path: Path) -> tuple[StoreWriter, dict[str, ClusterView]]:
    writer = StoreWriter(tmp_path / "skybot.db")
    now = time.time()

    def polls(db: object) -> None:
        for cluster in ("skynet", "nova"):
            for source in ("slurm", "accounting", "caps", "storage"):
                mark_success(db, cluster, source, now - 5)  # type: ignore[arg-type]
        record_poll_failure(db, "nova", "slurm", "slurmrestd: connection refused", now - 3)  # type: ignore[arg-type]

    await writer.run(polls)
    views = {c: ClusterView(await writer.run(load_snapshot, c), LABS) for c in ("skynet", "nova")}
    return writer, views


async def test_readyz_names_each_clusters_checks_and_can_be_asked_per_cluster(
    two_views: tuple[StoreWriter, dict[str, ClusterView]],
) -> None:
    writer, views = two_views
    status = _status(writer, views, ["the slurm@nova poll has not completed for 99 s"])
    try:
        ready, body = status.report(time.time())
        assert not ready and body["ready"] is False
        nova = body["clusters"]["nova"]
        assert nova["ready"] is False
        assert "slurmrestd: connection refused" in nova["checks"]["slurm"]["detail"]
        assert "slurm@nova poll has not completed" in nova["checks"]["pollers"]["detail"]
        skynet = body["clusters"]["skynet"]
        assert skynet["ready"] is True and skynet["checks"]["pollers"]["ok"] is True
        # The flat checks are the process's and the default cluster's, as they always were.
        assert list(body["checks"]) == [
            "slack",
            "slurm",
            "accounting",
            "sender",
            "pollers",
            "store",
        ]
        assert body["checks"]["slurm"]["ok"] is True
        # Per cluster: nova's outage does not make skynet unready.
        assert status.report(time.time(), "skynet")[0] is True
        assert list(status.report(time.time(), "skynet")[1]["clusters"]) == ["skynet"]
        assert status.report(time.time(), "nova")[0] is False
    finally:
        writer.close()


async def test_metrics_label_every_slurm_figure_and_check_by_cluster(
    two_views: tuple[StoreWriter, dict[str, ClusterView]], unused_tcp_port: int
) -> None:
    writer, views = two_views
    metrics = Metrics()
    metrics.observe_poll("slurm", "nova", 0.2)
    metrics.observe_poll_interval("storage", "nova", 300.0)
    status = _status(writer, views, [])
    app = metrics_app(metrics, status, writer)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", unused_tcp_port).start()
    base = f"http://127.0.0.1:{unused_tcp_port}"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/metrics") as response:
                text = await response.text()
            async with session.get(f"{base}/readyz?cluster=skynet") as response:
                assert response.status == 200
            async with session.get(f"{base}/readyz?cluster=nova") as response:
                assert response.status == 503
            async with session.get(f"{base}/readyz") as response:
                assert response.status == 503
                assert (await response.json())["clusters"]["nova"]["ready"] is False
            async with session.get(f"{base}/readyz?cluster=orion") as response:
                assert response.status == 404
                assert "no cluster called 'orion'" in (await response.json())["error"]
    finally:
        await runner.cleanup()
        writer.close()
    assert 'skybot_source_failing{cluster="nova",source="slurm"} 1.0' in text
    assert 'skybot_source_failing{cluster="skynet",source="slurm"} 0.0' in text
    assert 'skybot_snapshot_age_seconds{cluster="nova",source="storage"}' in text
    assert 'skybot_poll_duration_seconds_count{cluster="nova",source="slurm"} 1.0' in text
    assert 'skybot_poll_interval_seconds{cluster="nova",source="storage"} 300.0' in text
    assert 'skybot_ready{check="slurm",cluster="nova"} 0.0' in text
    assert 'skybot_ready{check="slurm",cluster="skynet"} 1.0' in text
    assert 'skybot_ready{check="store",cluster=""} 1.0' in text
    assert 'skybot_poll_restarts{cluster="nova",source="slurm"} 2.0' in text


async def test_every_line_a_clusters_poll_logs_names_the_cluster(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`slurm poll failed` and whatever the sources, worker and watchers log in a poll."""
    name_clusters_in_logs()
    logger = logging.getLogger("scheduler.slurm.poller")

    async def failing() -> None:
        logger.warning("slurm poll failed (next try in %d s): %s", 30, "boom")

    progress = PollProgress("slurm@nova", 60.0, 1.0)
    task = asyncio.create_task(IntervalLoop(progress, failing, "nova").run())
    await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    logger.warning("not in a poll")
    (inside, outside) = [r for r in caplog.records if r.name == logger.name]
    assert inside.getMessage() == "cluster nova: slurm poll failed (next try in 30 s): boom"
    assert json.loads(JsonLines().format(inside))["cluster"] == "nova"
    assert outside.getMessage() == "not in a poll"
