"""Job-end DMs end to end: real jobs on the test cluster, the real bot, the Slack stand-in."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.bot_process import dms_about, linked_bot, linked_bot_config, wait_for_slurm_poll
from tests.support.cluster import sbatch_async, squeue_state, wait_for

pytestmark = pytest.mark.cluster


async def test_each_job_end_gets_exactly_one_correct_dm(tmp_path: Path, clean_queue: None) -> None:
    config = linked_bot_config(tmp_path)
    async with linked_bot(config) as slack:
        timeout_job = await sbatch_async(
            "bob",
            "-p",
            "debug",
            "-A",
            "hoffman-lab",
            "--time=1",
            "-J",
            "too-slow",
            "--wrap",
            "sleep 300",
        )
        completed = await sbatch_async(
            "dave", "-p", "kira-lab", "-A", "kira-lab", "-J", "fine", "--wrap", "sleep 3"
        )
        failed = await sbatch_async(
            "carol",
            "-p",
            "kira-lab",
            "-A",
            "kira-lab",
            "-J",
            "broken",
            "--wrap",
            "sleep 3; exit 3",
        )
        overcap = await sbatch_async(
            "alice",
            "-p",
            "overcap",
            "-A",
            "overcap",
            "-w",
            "baymax",
            "--gpus-per-node=4",
            "-J",
            "sweep",
            "--wrap",
            "sleep 300",
        )
        await wait_for(lambda: squeue_state(overcap) == "RUNNING", 30, "the overcap job to run")
        await wait_for_slurm_poll(config.database.path)  # the bot has seen it running
        await sbatch_async(
            "carol",
            "-p",
            "kira-lab",
            "-A",
            "kira-lab",
            "-w",
            "baymax",
            "--gpus-per-node=2080_ti:2",
            "-J",
            "urgent",
            "--wrap",
            "sleep 300",
        )

        expected = {
            completed: ("UDAVE", "completed successfully."),
            failed: ("UCAROL", "failed with exit code 3"),
            overcap: ("UALICE", "was preempted and requeued (restart 1)"),
            timeout_job: ("UBOB", "reached its time limit of 1 min"),
        }
        # The 1-minute limit is enforced at the controller's pace (its time-limit sweep, then
        # KillWait): 89 s on an idle host, over 150 s once on CI's busy one.
        await wait_for(
            lambda: all(dms_about(slack, job_id) for job_id in expected),
            240,
            "a DM per job",
            1,
            in_thread=False,
        )
        await asyncio.sleep(6)  # a few more polls: nothing may be sent twice

    for job_id, (slack_id, words) in expected.items():
        dms = dms_about(slack, job_id)
        assert len(dms) == 1, f"job {job_id}: {dms}"
        assert words in dms[0], dms[0]
        channel = next(
            c.params["channel"]
            for c in slack.calls_to("chat.postMessage")
            if c.ok and str(c.params.get("text")) == dms[0]
        )
        assert channel in (slack_id, slack.dm_channel_for(slack_id))
    preempted = dms_about(slack, overcap)[0]
    assert "checkpoint" in preempted.lower()
