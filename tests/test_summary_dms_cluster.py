"""The summary of a burst of ends on the real cluster (issue 40): slurmdbd is down while 8 of
alice's jobs end, 3 of them failing; the CLI source holds their ends until sacct answers, then
tells them at once, as one DM that names the cluster and the 3 exit codes, with a button to
each failed job's log."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from bot.config import SlurmConfig
from tests.bot_process import linked_bot, linked_bot_config
from tests.cluster import cluster_script, sbatch, squeue_state, wait_for
from tests.test_slurm_outages_cluster import _source_error

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
            await wait_for(lambda: _source_error(database, "accounting"), 30, "sacct to fail")
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
        await wait_for(lambda: _source_error(database, "accounting") is None, 60, "sacct")

        def summaries() -> list[str]:
            return [
                str(call.params.get("text"))
                for call in slack.calls_to("chat.postMessage")
                if str(call.params.get("text")).startswith("📋")
            ]

        await wait_for(summaries, 90, "the summary DM")
        await asyncio.sleep(10)  # nothing told twice
    (summary,) = summaries()
    assert summary.startswith("📋 8 of your jobs on cluster `skynet` changed state: 5 completed, "
                              "3 failed."), summary  # fmt: skip
    for job_id, code in jobs.items():
        if code:
            assert re.search(rf"failed with exit code {code}: job {job_id}\b", summary), summary
    other = [str(c.params.get("text")) for c in slack.calls_to("chat.postMessage")]
    assert not [t for t in other if any(f"Job {j} " in t for j in jobs)], other
