"""Move to overcap through the Slack stand-in, over Socket Mode and over HTTP (signed requests
as Slack sends them): the real bot and Bolt app, the real runner through sudo, the real cluster.

alice fills hoffman-lab's cap (4 GPUs), so her next job pends with AssocGrpGRES while clippy's
a40s sit idle. `/sky why` offers her the button; bob clicking it (a forwarded message) is
refused and the job stays as it was; alice's click moves it to overcap as alice, with the same
job id, and it runs. Each click is acked within Slack's 3 s, before its outcome is known."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from msgspec.structs import replace

from bot.config import SlackConfig
from tests.support.bot_process import (
    SLACK_IDS,
    free_port,
    linked_bot_config,
    linked_users,
    running_bot,
    wait_for_slurm_poll,
)
from tests.support.cluster import sbatch_async, squeue_json, wait_for
from tests.support.slack_standin import SlackStandIn, signed_block_action

pytestmark = pytest.mark.cluster

SECRET = "move-to-overcap-over-slack"
ACK_SECONDS = 3.0  # Slack shows the user an error when a click is not acknowledged in 3 s


def queued(job_id: int) -> dict[str, Any] | None:
    """The job as squeue lists it now: state, partition, account and pending reason."""
    for job in squeue_json()["jobs"]:
        if job["job_id"] == job_id:
            return {
                "state": job["job_state"],
                "partition": job["partition"],
                "account": job["account"],
                "reason": job["state_reason"],
            }
    return None


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_move_to_overcap_acts_as_the_clicker_only(
    mode: str, tmp_path: Path, clean_queue: None, checkout_runner: None
) -> None:
    common = ("-A", "hoffman-lab", "-p", "hoffman-lab", "--chdir=/tmp", "-o", "/dev/null")
    # hoffman-lab's 4 GPUs, all on xaea-12: clippy's four a40s stay idle.
    await sbatch_async("alice", *common, "--gpus-per-node=rtx_6000:4", "--wrap", "sleep 600")
    waiting = await sbatch_async(
        "alice", *common, "-J", "train", "--gpus-per-node=a40:2", "--wrap", "sleep 600"
    )
    at_cap = {
        "state": "PENDING",
        "partition": "hoffman-lab",
        "account": "hoffman-lab",
        "reason": "AssocGrpGRES",
    }
    await wait_for(lambda: queued(waiting) == at_cap, 30, "the job to wait at the lab's cap")

    port = free_port()
    url = f"http://127.0.0.1:{port}/slack/events"
    config = replace(linked_bot_config(tmp_path), slack=SlackConfig(mode=mode, http_port=port))
    acks: list[float] = []
    outcome_first: list[bool] = []
    async with (
        SlackStandIn(users=linked_users()) as slack,
        running_bot(config, slack, SECRET),
        aiohttp.ClientSession() as session,
    ):

        async def why(user: str) -> list[dict[str, Any]]:
            """The buttons in `user`'s answer to `/sky why JOB`."""
            text, user_id = f"why {waiting}", SLACK_IDS[user]
            if mode == "socket":
                delivery = await slack.send_slash_command(
                    command="/sky", text=text, user_id=user_id
                )
                blocks = (delivery.payload or {}).get("blocks", [])
            else:
                signed = slack.signed_slash_command(
                    SECRET, command="/sky", text=text, user_id=user_id
                )
                async with session.post(url, data=signed.body, headers=signed.headers) as response:
                    assert response.status == 200
                    blocks = (await response.json()).get("blocks", [])
            return [e for b in blocks if b["type"] == "actions" for e in b["elements"]]

        async def click(user: str, button: dict[str, Any]) -> str:
            payload = slack.block_action_payload(
                user_id=SLACK_IDS[user], action_id=button["action_id"], value=button["value"]
            )
            started = time.monotonic()
            if mode == "socket":
                await slack.send_block_action(payload, timeout=ACK_SECONDS)
            else:
                signed = signed_block_action(SECRET, payload)
                async with session.post(url, data=signed.body, headers=signed.headers) as r:
                    assert r.status == 200
            acks.append(time.monotonic() - started)
            # Acked before the outcome is known: the runner's work comes after the answer.
            outcome_first.append(
                any(p.url == payload["response_url"] for p in slack.response_url_posts)
            )
            post = await slack.wait_for_response_url_post(url=payload["response_url"], timeout=60)
            assert post.body.get("replace_original") is True
            return str(post.body["text"])

        async def offered() -> list[dict[str, Any]] | None:
            try:
                return await why("alice") or None
            except aiohttp.ClientConnectionError:
                return None  # not listening yet

        if mode == "socket":
            await slack.wait_for_socket_connection(timeout=15)
        # Once a poll has seen the job, alice's own answer carries the button; bob's does not.
        buttons = await wait_for(offered, 30, "/sky why to offer Move to overcap")
        (button,) = buttons
        assert button["action_id"] == f"skybot_move_to_overcap:skynet/{waiting}"
        assert "*preemptible*" in button["confirm"]["text"]["text"]
        assert await why("bob") == []

        # bob clicking alice's button is refused, and nothing changes in Slurm.
        assert await click("bob", button) == (
            f"Job `{waiting}` belongs to `alice`, not to you (`bob`): skybot acts only as you, "
            "so nothing was done."
        )
        assert queued(waiting) == at_cap

        # alice's click moves it as alice: same job id, overcap's partition and account.
        assert await click("alice", button) == (
            f"Moved job `{waiting}` `train` to partition `overcap`, account `overcap` (as "
            "`alice`), with the same job id: it starts on idle GPUs there, and is requeued when "
            "a lab needs them."
        )
        assert outcome_first[-1] is False  # the ack did not wait for sudo, squeue and scontrol
        moved = await wait_for(
            lambda: (q := queued(waiting)) and q["state"] == "RUNNING" and q, 30, "it to run"
        )
        assert (moved["partition"], moved["account"]) == ("overcap", "overcap")

        # The same button once skybot has seen it run: stale, and it says so.
        await wait_for_slurm_poll(config.database.path, acted_on=True)
        assert await click("alice", button) == (
            f"Job `{waiting}` is no longer pending (it started, ended or was cancelled): "
            "nothing was moved."
        )
    print(f"click acks over {mode}: {', '.join(f'{a * 1000:.0f} ms' for a in acks)}")
    assert max(acks) < ACK_SECONDS
