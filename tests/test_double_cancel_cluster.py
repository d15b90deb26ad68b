"""One scancel per job however often it is asked for (issue 27 items 5 and 7), on the real
cluster: the real bot over Socket Mode against the Slack stand-in, the real runner through sudo.

slurmctld's own count of kill requests (sdiag's REQUEST_KILL_JOB, cluster-wide: the cluster
lock keeps every other test off it) says how many scancels reached it.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.bot_process import SLACK_IDS, linked_bot, linked_bot_config
from tests.support.cluster import sbatch_async, squeue_state, wait_for
from tests.support.slack_standin import Delivery, SlackStandIn

pytestmark = pytest.mark.cluster

ACK_SECONDS = 3.0


def kill_requests() -> int:
    """How many REQUEST_KILL_JOB RPCs slurmctld has served since it started (or sdiag -r)."""
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"^\s*REQUEST_KILL_JOB\s+\(\s*\d+\)\s+count:(\d+)", out, re.MULTILINE)
    return int(match.group(1)) if match else 0


async def click_cancel(slack: SlackStandIn, user: str, job_id: int) -> tuple[Delivery, str]:
    payload = slack.block_action_payload(
        user_id=SLACK_IDS[user], action_id=f"skybot_cancel_job:{job_id}", value=str(job_id)
    )
    return await slack.send_block_action(payload, timeout=ACK_SECONDS), payload["response_url"]


async def test_a_double_click_on_cancel_is_one_scancel_and_says_cancelled(
    tmp_path: Path, clean_queue: None, checkout_runner: None
) -> None:
    held = await sbatch_async(
        "alice", "-p", "debug", "-A", "hoffman-lab", "--hold", "-J", "held", "--wrap", "true"
    )
    async with linked_bot(linked_bot_config(tmp_path)) as slack:
        before = kill_requests()

        async def second_click() -> tuple[Delivery, str]:
            await asyncio.sleep(0.01)  # a double-click: 10 ms apart
            return await click_cancel(slack, "alice", held)

        clicks = await asyncio.gather(click_cancel(slack, "alice", held), second_click())
        answers = [await slack.wait_for_response_url_post(url=url, timeout=60) for _, url in clicks]
        await wait_for(lambda: squeue_state(held) in (None, "CANCELLED"), 30, "the cancel")
        assert kill_requests() - before == 1
        for answer in answers:
            assert answer.body["text"] == f"Cancelled job `{held}` `held` (as `alice`)."
            assert answer.body["replace_original"] is True
        assert len(slack.response_url_posts) == 2


async def test_cancel_of_someone_elses_job_never_reaches_slurm(
    tmp_path: Path, clean_queue: None, checkout_runner: None
) -> None:
    """`/sky cancel` ran scancel as the asker for a job not theirs: slurmctld logged "Security
    violation, REQUEST_KILL_JOB RPC … from uid 1002". It is refused from the snapshot now."""
    held = await sbatch_async(
        "alice", "-p", "debug", "-A", "hoffman-lab", "--hold", "-J", "held", "--wrap", "true"
    )
    async with linked_bot(linked_bot_config(tmp_path)) as slack:
        before = kill_requests()
        answer = await slack.send_slash_command(
            command="/sky", text=f"cancel {held}", user_id=SLACK_IDS["bob"]
        )
        assert answer.payload is not None
        assert answer.payload["text"] == (
            f"Job `{held}` belongs to `alice`, not to you (`bob`): skybot acts only as you, "
            "so nothing was done."
        )
        assert kill_requests() == before
        assert squeue_state(held) == "PENDING"
