"""The summary DM of a burst of ends (issue 40): more than 5 of a user's jobs ending in one
poll (after an accounting outage, the CLI source tells them all at once) are one DM, which
names its cluster and every failed job's exit code, with a button to each one's log."""

from __future__ import annotations

import json

from bot.config import load_config
from core.log_more import LOG_MORE
from scheduler.watchers.job_dms import process_transitions
from store.outbox import outbox_rows
from store.writer import StoreWriter
from tests.support.factories import CLUSTER, job
from tests.support.slurm_polls import save_slurm_poll


class Links:
    def slack_users_of(self, cluster_user: str) -> list[tuple[str, str]]:
        return [("T1", "U1")] if cluster_user == "alice" else []


async def test_eight_ends_after_an_outage_with_three_failing(writer: StoreWriter) -> None:
    running = [job(n, start_time=1000, nodes="clippy") for n in range(101, 109)]
    await writer.run(save_slurm_poll, running, [], [], 1100.0)
    # slurmdbd is down: the jobs leave squeue, and their ends wait for sacct.
    await writer.run(save_slurm_poll, [], [], [], 1200.0, False)
    codes = {102: 3, 105: 3, 107: 137}
    ended = [
        job(n, state="FAILED" if n in codes else "COMPLETED", start_time=1000, end_time=1150,
            exit_code=codes.get(n, 0), nodes="clippy")
        for n in range(101, 109)
    ]  # fmt: skip
    await writer.run(save_slurm_poll, [], ended, [], 1300.0)
    config = load_config(None)
    assert await process_transitions(writer, Links(), config, config.default_cluster) == 1
    (row,) = await writer.run(outbox_rows)
    text = str(row["text"])
    assert text.startswith(
        f"📋 8 of your jobs on cluster `{CLUSTER}` changed state: 5 completed, 3 failed."
    ), text
    assert "• failed with exit code 3: jobs 102, 105" in text, text
    assert "• failed with exit code 137: job 107" in text, text
    buttons = [e for b in json.loads(str(row["blocks"])) if b["type"] == "actions"
               for e in b["elements"]]  # fmt: skip
    assert [b["action_id"] for b in buttons] == [
        f"{LOG_MORE}:{CLUSTER}/{n}:out" for n in (102, 105, 107)
    ]
