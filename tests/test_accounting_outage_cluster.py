"""Accounting outages in answers and caps (issue 26 item 12): the message names what failed,
slurmdbd or the database behind it, and since when; the lab caps are current again one poll
after sacct answers, not when their own back-off runs out. On the real cluster."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from core.view import ClusterView
from tests.support.cluster import cluster_script, sbatch, wait_for, wait_until
from tests.support.poller_harness import Harness, harness, running
from tests.support.why_answers import LAB, why

pytestmark = pytest.mark.cluster
__all__ = ["harness"]  # a fixture, used by name


async def test_caps_are_current_again_one_poll_after_accounting_answers(
    harness: Harness,
) -> None:
    """Issue 26 item 12: after an accounting outage the caps waited out their own back-off
    (up to 5 min) although sacct, through the same slurmdbd, answered again."""
    job_id = sbatch("alice", *LAB, "--wrap", "sleep 600")
    await running(harness, job_id)
    assert not (await harness.cache.refresh()).snapshot.source("caps").failing
    cluster_script("stop-accounting")
    try:
        harness.now += 1
        assert await harness.poller.poll_caps() is False
        assert await harness.poller.poll_jobs() is True
        view = await harness.cache.refresh()
        assert view.snapshot.source("caps").failing
        text = await why(harness, str(job_id))
        outage = next(line for line in text.splitlines() if "has not answered" in line)
        assert "Slurm accounting (slurmdbd, asked by sacctmgr) has not answered since " in outage
        # The outage is 1 s old; the job's own line may well say "running for 0 s".
        assert "for 0 s" not in outage
    finally:
        cluster_script("up")
    harness.now += 1  # well inside the caps back-off
    assert await harness.poller.poll_jobs() is True
    view = await harness.cache.refresh()
    assert not view.snapshot.source("accounting").failing
    assert not view.snapshot.source("caps").failing
    assert view.snapshot.caps


def stop_the_database() -> None:
    """MariaDB stopped under slurmdbd, which keeps running (SIGTERM: a clean shutdown)."""
    pid = int(Path("/run/mysqld/mysqld.pid").read_text().split()[0])
    os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not Path(f"/proc/{pid}").exists(), 60, "MariaDB to stop", 0.2)


async def test_a_database_outage_is_named_and_caps_recover_one_poll_after(
    harness: Harness,
) -> None:
    """Issue 26 item 12 as reported: MariaDB down, slurmdbd up."""
    job_id = sbatch("alice", *LAB, "--wrap", "sleep 600")
    await running(harness, job_id)
    stop_the_database()
    try:
        harness.now += 1
        assert await harness.poller.poll_caps() is False
        text = await why(harness, str(job_id))
        assert "The accounting database (behind slurmdbd, asked by sacctmgr) has not" in text
        assert "slurmdbd) has not" not in text
    finally:
        cluster_script("up")

    async def answered_again() -> ClusterView | None:
        harness.now += 1
        assert await harness.poller.poll_jobs() is True
        view = await harness.cache.refresh()
        return None if view.snapshot.source("accounting").failing else view

    view = await wait_for(answered_again, 60, "sacct to answer again", 1)
    assert not view.snapshot.source("caps").failing, "caps current in the same poll"
