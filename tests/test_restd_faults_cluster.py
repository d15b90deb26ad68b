"""slurmrestd's faults made for real, read by the real poller: 22.05's daemon on this host and,
in the 24.11 cluster lane, 24.11's inside the sandbox. An expired token, one for SlurmUser
(refused, never sent), one for a user that does not exist (said), slurmrestd stopped and
started again: each failure names its part in users' words, and the cluster is current again
one poll after slurmrestd answers properly. The fake daemon's degenerate answers are in
tests/test_restd_faults.py."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from msgspec.structs import replace

from bot.config import DatabaseConfig, SlurmConfig, load_config
from core.cluster_config import ClusterConfig
from core.slurm_failure import Part, part_of
from core.snapshot import SourceStatus
from handlers.commands.common import outage_words
from scheduler.slurm.poller import SlurmPoller
from scheduler.slurm.restd_identity import slurm_conf_facts, unsafe_token_file
from scheduler.slurm.restd_source import source_for
from store.snapshots import load_snapshot
from store.writer import StoreWriter
from tests.support.cluster import cluster_script
from tests.support.restd_daemon import SOCKET, mint_for

pytestmark = pytest.mark.cluster

POLL = 5.0


@dataclass
class Polled:
    poller: SlurmPoller
    writer: StoreWriter
    token: Path
    offset: list[float]

    async def poll(self) -> bool:
        """One scheduled poll, `POLL` seconds of the back-off's clock after the last."""
        self.offset[0] += POLL
        return await self.poller.poll_jobs()

    async def status(self) -> SourceStatus:
        snapshot = await self.writer.run(load_snapshot, self.poller.cluster)
        return snapshot.source("slurm")

    async def told(self) -> tuple[Part, str]:
        status = await self.status()
        assert status.failing and status.error is not None
        words = outage_words("slurm", status.error, status.error_at, "5 s ago", time.time())
        return part_of(status.error), words


@pytest.fixture(scope="module")
def restd_cluster(cluster: None) -> Iterator[None]:
    cluster_script("up")  # slurmrestd started, if a test left it stopped
    yield


@pytest.fixture
async def polled(restd_cluster: None, tmp_path: Path) -> AsyncIterator[Polled]:
    token = tmp_path / "skybot.jwt"
    mint_for("skybot", token, 600)
    cluster = ClusterConfig(
        "skynet", source="slurmrestd", url=SOCKET, token_file=str(token), slurm=SlurmConfig()
    )
    config = replace(
        load_config(None),
        slurm=SlurmConfig(poll_seconds=POLL),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
    )
    writer = StoreWriter(config.database.path)
    offset = [0.0]
    poller = SlurmPoller(
        replace(cluster, slurm=config.slurm),
        config,
        writer,
        clock=lambda: time.time() + offset[0],
        source=source_for(cluster),
    )
    yield Polled(poller, writer, token, offset)
    await poller.close()
    writer.close()


async def test_an_expired_token_is_said_and_a_new_one_is_current_within_a_poll(
    polled: Polled,
) -> None:
    assert await polled.poll()
    mint_for("skybot", polled.token, 1)
    time.sleep(2.1)
    assert not await polled.poll()
    part, words = await polled.told()
    assert (
        part is Part.TOKEN_EXPIRED
        and "token for Slurm's REST API (slurmrestd) has expired" in words
    )
    assert "slurmctld" not in words
    assert not await polled.poll()  # backing off; the ping fails too
    mint_for("skybot", polled.token, 600)
    assert await polled.poll(), "current one poll after a good token is in place"
    assert not (await polled.status()).failing


async def test_a_slurmuser_token_is_refused_unsent_at_start_and_when_rotated_in(
    polled: Polled, tmp_path: Path
) -> None:
    facts = slurm_conf_facts()  # the cluster's own slurm.conf: SlurmUser=root here
    slurm_user = facts.slurm_user or "root"
    root_token = tmp_path / "root.jwt"
    mint_for(slurm_user, root_token, 600)
    refused = unsafe_token_file(str(root_token), facts)
    assert refused is not None and "skybot refuses it" in refused

    assert await polled.poll()
    mint_for(slurm_user, polled.token, 600)
    assert not await polled.poll()
    part, words = await polled.told()
    assert part is Part.TOKEN_UNSAFE and "root or SlurmUser" in words
    mint_for("skybot", polled.token, 600)
    assert await polled.poll()


async def test_a_token_for_a_user_that_does_not_exist_is_said(
    polled: Polled, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="scheduler.slurm.restd_source")
    assert await polled.poll()
    assert any("reading as skybot" in r.getMessage() for r in caplog.records)
    identity = "scheduler.slurm.restd_source"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name == identity]
    mint_for("nosuchuser", polled.token, 600)
    await polled.poll()
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("'nosuchuser', a user slurmctld does not know" in m for m in said), said


async def test_slurmrestd_stopped_is_said_and_current_one_poll_after_it_starts(
    polled: Polled,
) -> None:
    assert await polled.poll()
    cluster_script("stop-restd")
    try:
        assert not await polled.poll()
        part, words = await polled.told()
        assert part is Part.RESTD_UNREACHABLE and "slurmrestd" in words
        assert "slurmctld" not in words
        for _ in range(3):
            assert not await polled.poll()
    finally:
        cluster_script("up")
    started = time.monotonic()
    assert await polled.poll(), "current one poll after slurmrestd answers"
    print(f"current {time.monotonic() - started:.2f} s after `up` returned")
    assert not (await polled.status()).failing


async def test_a_hung_slurmctld_behind_slurmrestd_is_told_and_current_a_poll_after_it_resumes(
    polled: Polled,
) -> None:
    """slurmctld SIGSTOPped: slurmrestd's reads fail (or time out), its pings say DOWN; once
    slurmctld resumes, the back-off's ping lets the next poll through (before the fix the ping
    never read UP, and the cluster waited out the whole back-off)."""
    assert await polled.poll()
    cluster_script("pause-controller")
    try:
        assert not await polled.poll()
        part, words = await polled.told()
        assert part in (Part.SLURM, Part.RESTD_UNREACHABLE), words
        for _ in range(3):  # 5, 10 s of back-off: pings only
            assert not await polled.poll()
        assert polled.poller.consecutive_failures >= 2
    finally:
        cluster_script("resume-controller")
    started = time.monotonic()
    assert await polled.poll(), "current one poll after slurmctld resumes"
    print(f"current {time.monotonic() - started:.2f} s after slurmctld resumed")
    assert not (await polled.status()).failing
