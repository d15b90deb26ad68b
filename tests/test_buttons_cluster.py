"""Buttons through the Slack stand-in, over Socket Mode and signed HTTP: the real bot, the real
runner through sudo, the real cluster. A click acts as the CLICKING user's own linked account,
after every check again; it is acked within Slack's 3 s and the outcome replaces the message."""

from __future__ import annotations

import time
from pathlib import Path

import aiohttp
import pytest
from msgspec.structs import replace

from bot.config import SlackConfig
from tests.support.bot_process import (
    SLACK_IDS,
    free_port,
    linked_bot,
    linked_bot_config,
    wait_for_slurm_poll,
)
from tests.support.cluster import sbatch, squeue_state, wait_for
from tests.support.slack_standin import signed_block_action

pytestmark = pytest.mark.cluster

SECRET = "buttons-over-slack"
ACK_SECONDS = 3.0  # Slack shows the user an error when a click is not acknowledged in 3 s


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_cancel_button_acts_as_the_clicker_only(
    mode: str, tmp_path: Path, clean_queue: None, checkout_runner: None
) -> None:
    held = sbatch(
        "alice", "-p", "debug", "-A", "hoffman-lab", "--hold", "-J", "held", "--wrap", "true"
    )
    port = free_port()
    config = replace(linked_bot_config(tmp_path), slack=SlackConfig(mode=mode, http_port=port))
    async with linked_bot(config, SECRET) as slack, aiohttp.ClientSession() as session:

        async def click(user: str, job_id: int) -> str:
            payload = slack.block_action_payload(
                user_id=SLACK_IDS[user], action_id=f"skybot_cancel_job:{job_id}", value=str(job_id)
            )
            if mode == "socket":
                await slack.send_block_action(payload, timeout=ACK_SECONDS)
            else:
                signed = signed_block_action(SECRET, payload)
                started = time.monotonic()
                url = f"http://127.0.0.1:{port}/slack/events"
                async with session.post(url, data=signed.body, headers=signed.headers) as r:
                    assert r.status == 200
                assert time.monotonic() - started < ACK_SECONDS
            post = await slack.wait_for_response_url_post(url=payload["response_url"], timeout=60)
            assert post.body.get("replace_original") is True
            return str(post.body["text"])

        if mode == "socket":
            # /sky jobs offers alice the button, with a confirm dialog, on her own job.
            answer = await slack.send_slash_command(command="/sky", text="jobs", user_id="UALICE")
            blocks = (answer.payload or {}).get("blocks", [])
            buttons = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
            # It names its cluster, the only one's too; the clicks below send a value naming
            # none (a message sent before values named their cluster), still read.
            assert [b["action_id"] for b in buttons] == [f"skybot_cancel_job:skynet/{held}"]
            assert "confirm" in buttons[0]

        # bob clicking alice's button (a forwarded message) is refused; the job stays.
        assert await click("bob", held) == (
            f"Job `{held}` belongs to `alice`, not to you (`bob`): skybot acts only as you, "
            "so nothing was done."
        )
        assert squeue_state(held) == "PENDING"

        # alice's click cancels it, as alice.
        assert await click("alice", held) == f"Cancelled job `{held}` `held` (as `alice`)."
        await wait_for(
            lambda: squeue_state(held) in (None, "CANCELLED"), 30, "the job to be cancelled"
        )

        # The same button again, once skybot has seen the job go: stale, and it says so.
        await wait_for_slurm_poll(config.database.path, acted_on=True)
        assert await click("alice", held) == (
            f"Job `{held}` is no longer running or pending: there is nothing to cancel."
        )
