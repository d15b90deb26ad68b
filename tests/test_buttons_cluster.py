"""Buttons through the Slack stand-in: the real bot, the real runner through sudo, the real
cluster. A click acts as the CLICKING user's own linked account, after every check again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.bot_process import SLACK_IDS, linked_bot_config, linked_users, running_bot
from tests.cluster import sbatch, squeue_state, wait_until
from tests.slack_standin import SlackStandIn

pytestmark = pytest.mark.cluster


async def reply_to(slack: SlackStandIn, user: str, job_id: int) -> str:
    """alice's or bob's click on the Cancel button of job `job_id`: acked within Slack's 3 s
    (send_block_action's timeout), then the outcome replaces the message."""
    delivery, url = await slack.send_block_action(
        user_id=SLACK_IDS[user], action_id=f"skybot_cancel_job:{job_id}", value=str(job_id)
    )
    assert delivery.ack.get("envelope_id") == delivery.envelope_id
    post = await slack.wait_for_response_url_post(url=url, timeout=60)
    assert post.body.get("replace_original") is True
    return str(post.body["text"])


async def test_cancel_button_acts_as_the_clicker_only(
    tmp_path: Path, clean_queue: None, checkout_runner: None
) -> None:
    held = sbatch(
        "alice", "-p", "debug", "-A", "hoffman-lab", "--hold", "-J", "held", "--wrap", "true"
    )
    async with (
        SlackStandIn(users=linked_users()) as slack,
        running_bot(linked_bot_config(tmp_path), slack),
    ):
        await slack.wait_for_socket_connection(timeout=15)
        # /sky jobs offers alice the button on her own job, once a poll has seen it.
        await asyncio.sleep(3)
        answer = await slack.send_slash_command(command="/sky", text="jobs", user_id="UALICE")
        payload = answer.payload or {}
        buttons = [
            e for b in payload.get("blocks", []) if b["type"] == "actions" for e in b["elements"]
        ]
        assert [b["action_id"] for b in buttons] == [f"skybot_cancel_job:{held}"]
        assert "confirm" in buttons[0]

        # bob clicking alice's button (a forwarded message) is refused; the job stays.
        refused = await reply_to(slack, "bob", held)
        assert refused == (
            f"Job `{held}` belongs to `alice`, not to you (`bob`): skybot acts only as you, "
            "so nothing was done."
        )
        assert squeue_state(held) == "PENDING"

        # alice's click cancels it, as alice.
        done = await reply_to(slack, "alice", held)
        assert done == f"Cancelled job `{held}` `held` (as `alice`)."
        wait_until(lambda: squeue_state(held) in (None, "CANCELLED"), 30, "the job to be cancelled")

        # The same button again, once skybot has seen the job go: stale, says so.
        await asyncio.sleep(4)
        stale = await reply_to(slack, "alice", held)
        assert stale == f"Job `{held}` is no longer running or pending: there is nothing to cancel."
