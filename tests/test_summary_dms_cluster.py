"""The summary of a burst of ends on the real cluster (issue 40): slurmdbd is down while 8 of
alice's jobs end, 3 of them failing; the CLI source holds their ends until sacct answers, then
tells them (more than 5 in one poll: as one DM that names the cluster and the exit codes)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from bot.config import SlurmConfig
from tests.support.bot_process import linked_bot, linked_bot_config
from tests.support.cluster import cluster_script, sbatch, squeue_state, wait_for
from tests.support.stored_polls import source_error

pytestmark = pytest.mark.cluster

CODES = (0, 3, 0, 4, 0, 5, 0, 0)


async def test_eight_ends_during_an_accounting_outage_are_one_summary(
    tmp_path: Path, clean_queue: None
) -> None:
    config = linked_bot_config(tmp_path, slurm=SlurmConfig(poll_seconds=3))
    database = Path(config.database.path)
    async with linked_bot(config) as slack:
        await asyncio.to_thread(cluster_script, "stop-accounting")
        try:
            await wait_for(lambda: source_error(database, "accounting"), 30, "sacct to fail")
            jobs = {
                sbatch("alice", "-p", "debug", "-A", "hoffman-lab", "-o", "/dev/null",
                       "--wrap", f"sleep 2; exit {code}"): code
                for code in CODES
            }  # fmt: skip
            await wait_for(
                lambda: all(squeue_state(j) is None for j in jobs), 90, "the jobs to leave squeue"
            )
        finally:
            await asyncio.to_thread(cluster_script, "up")
        await wait_for(lambda: source_error(database, "accounting") is None, 60, "sacct")

        def summaries() -> list[str]:
            return [
                str(call.params.get("text"))
                for call in slack.calls_to("chat.postMessage")
                if str(call.params.get("text")).startswith("📋")
            ]

        await wait_for(summaries, 90, "the summary DM")
        await asyncio.sleep(10)  # nothing told twice
    # slurmdbd hands the queued ends over at its own pace: seen here as 2, then 6 in the
    # next poll. Whatever the split, each end is told once, a summary of 6 or more names the
    # cluster, and each failed job's exit code is in the DM that tells it.
    texts = [str(c.params.get("text")) for c in slack.calls_to("chat.postMessage")]
    assert summaries(), texts
    for summary in summaries():
        assert re.match(r"📋 [0-9]+ of your jobs on cluster `skynet` changed state: ", summary)
    for job_id, code in jobs.items():
        alone = [t for t in texts if re.search(rf"\bJob {job_id}\b", t)]
        summed = [t for t in summaries() if re.search(rf"• {job_id} ", t)]
        assert len(alone) + len(summed) == 1, (job_id, texts)
        if code and summed:
            found = rf"failed with exit code {code}: jobs? [0-9, -]*\b{job_id}\b"
            assert re.search(found, summed[0]), summed
        elif code:
            assert f"failed with exit code {code}." in alone[0], alone
