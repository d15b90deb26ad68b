"""A job its node's failure requeues is told as requeued, never as ended with "resubmit"
(issue 40), on the real cluster: the node is set DOWN under a running `--requeue` job while
the poller watches, and every transition it records is told as skybot would tell it."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.job_notices import Seen, decide_job_notice
from core.record_codec import decode_job
from core.transitions import Transition
from tests.support.cluster import sbatch, wait_for
from tests.support.poller_harness import Harness, _config, running
from tests.support.why_answers import LAB

pytestmark = pytest.mark.cluster


@pytest.fixture
async def harness(tmp_path: Path, clean_queue: None) -> AsyncIterator[Harness]:
    h = Harness(_config(tmp_path))
    yield h
    h.close()


async def _told(harness: Harness, job_id: int) -> list[str]:
    """Each DM the recorded transitions of `job_id` earn under `/sky notify all`."""
    rows = await harness.writer.run(
        lambda db: list(
            db.execute(
                "SELECT from_state, to_state, restarts, record FROM job_transitions "
                "WHERE job_id = ? ORDER BY id",
                [job_id],
            )
        )
    )
    texts = []
    for from_state, to_state, restarts, record in rows:
        transition = Transition(decode_job(record), from_state, to_state, restarts)
        notice = decide_job_notice(
            transition, "all", Seen(time.time()), harness.config, harness.config.default_cluster
        )
        if notice is not None:
            texts.append(notice.text)
    return texts


async def test_a_node_failure_requeue_never_says_resubmit(harness: Harness) -> None:
    job_id = sbatch("alice", *LAB, "-w", "baymax", "--requeue", "--gpus-per-node=2080_ti:1",
                    "--wrap", "sleep 600")  # fmt: skip
    await running(harness, job_id)
    node = ["scontrol", "update", "NodeName=baymax"]
    try:
        subprocess.run([*node, "State=DOWN", "Reason=requeue-dm-test"], check=True)

        async def told_requeued() -> bool:  # every state Slurm shows on the way, polled
            await harness.poll()
            return any("requeued" in text for text in await _told(harness, job_id))

        await wait_for(told_requeued, 60, f"job {job_id}'s requeue told")
        for _ in range(6):  # and a few polls more: nothing else is told of it
            await harness.poll()
            await asyncio.sleep(0.5)
        texts = await _told(harness, job_id)
    finally:
        subprocess.run([*node, "State=RESUME"], capture_output=True, check=False)
    assert len(texts) == 1, texts
    assert "was requeued after its node failed" in texts[0], texts
    assert not [text for text in texts if "resubmit" in text.lower()], texts
