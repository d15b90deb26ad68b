"""The Slurm poller of a one-cluster bot driven by hand against the real test cluster: its store
and a reader, a clock the test moves, the `harness` fixture (import it into the test module
that uses it) and polling until a job runs."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from msgspec.structs import replace

from bot.config import Config, DatabaseConfig, SlurmConfig, load_config
from core.record_codec import decode_job
from core.records import Job
from core.view import ClusterView
from scheduler.slurm.poller import SlurmPoller
from store.reader import SnapshotCache
from store.writer import StoreWriter
from tests.support.cluster import wait_for


def _config(tmp_path: Path, bin_dir: str = "/usr/bin") -> Config:
    return replace(
        load_config(None),
        slurm=SlurmConfig(bin_dir=bin_dir, poll_seconds=1, command_timeout_seconds=10),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
    )


class Harness:
    """A poller, its store and a reader, driven by hand with a clock the test controls."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.now = time.time()
        self.writer = StoreWriter(config.database.path)
        self.poller = SlurmPoller(
            config.default_cluster, config, self.writer, clock=lambda: self.now
        )
        self.cache = SnapshotCache(config.database.path, config.default_cluster.name, config.labs)

    async def poll(self) -> ClusterView:
        self.now = max(self.now, time.time())
        await self.poller.poll_caps()
        await self.poller.poll_jobs()
        return await self.cache.refresh()

    async def transitions(self) -> list[tuple[int, str, int, dict]]:
        rows = await self.writer.run(
            lambda db: list(
                db.execute("SELECT job_id, to_state, restarts, record FROM job_transitions")
            )
        )
        return [(r[0], r[1], r[2], decode_job(r[3])) for r in rows]

    async def recorded(self, job_id: int, state: str, timeout: float) -> list[Job]:
        """Poll until the store holds `job_id`'s transition to `state`: its records."""

        async def found() -> list[Job]:
            await self.poll()
            return [
                job
                for recorded_id, to_state, _, job in await self.transitions()
                if recorded_id == job_id and to_state == state
            ]

        return await wait_for(found, timeout, f"job {job_id}'s {state} recorded")

    def close(self) -> None:
        self.cache.close()
        self.writer.close()


@pytest.fixture
async def harness(tmp_path: Path, clean_queue: None) -> AsyncIterator[Harness]:
    h = Harness(_config(tmp_path))
    yield h
    h.close()


async def running(harness: Harness, job_id: int) -> None:
    """Poll until the harness sees `job_id` running."""

    async def runs() -> bool:
        job = (await harness.poll()).jobs_by_id.get(job_id)
        return job is not None and job.state == "RUNNING"

    await wait_for(runs, 60, f"job {job_id} to run")
