"""Cancel on the App Home tab, through the Slack stand-in: the real bot over Socket Mode, the
real runner through sudo, the real cluster.

Slack sends a click on the Home tab without a response_url (it gives one only for clicks in
messages), so the outcome cannot replace a message: the bot publishes the tab again with the
outcome at its top. The click is checked like any other: bob clicking a Cancel button for
alice's job (a forged payload; his own tab has no such button) is refused.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.bot_process import SLACK_IDS, linked_bot_config, linked_users, running_bot
from tests.support.cluster import sbatch, squeue_state, wait_for
from tests.support.slack_standin import Call, SlackStandIn

pytestmark = pytest.mark.cluster

ACK_SECONDS = 3.0


async def test_cancel_on_the_home_tab_acts_as_the_clicker_and_shows_the_outcome_there(
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
        await asyncio.sleep(3)  # a poll has seen the job

        def mine(user_id: str) -> Callable[[Call], bool]:
            return lambda c: c.ok and c.params.get("user_id") == user_id

        async def published(user_id: str, count: int) -> None:
            await slack.wait_for_calls("views.publish", count, predicate=mine(user_id), timeout=60)

        def publishes(user_id: str) -> int:
            return len([c for c in slack.calls_to("views.publish") if mine(user_id)(c)])

        async def open_home(user_id: str) -> dict[str, Any]:
            before = publishes(user_id)
            await slack.send_app_home_opened(user_id, timeout=10)
            await published(user_id, before + 1)
            return slack.home_views[user_id]

        async def click(user: str, button: dict[str, Any]) -> str:
            """A click on `button` as published on alice's tab; the tab `user` gets back."""
            user_id = SLACK_IDS[user]
            before = publishes(user_id)
            payload = slack.home_block_action_payload(
                user_id=user_id,
                action_id=button["action_id"],
                value=button["value"],
                viewer="UALICE",
            )
            assert "response_url" not in payload
            await slack.send_block_action(payload, timeout=ACK_SECONDS)
            await published(user_id, before + 1)
            return json.dumps(slack.home_views[user_id]["blocks"], ensure_ascii=False)

        home = await open_home("UALICE")
        buttons = [e for b in home["blocks"] if b["type"] == "actions" for e in b["elements"]]
        assert [b["action_id"] for b in buttons] == [f"skybot_cancel_job:skynet/{held}"]
        assert "confirm" in buttons[0]

        bobs_tab = await click("bob", buttons[0])
        assert (
            f"Job `{held}` belongs to `alice`, not to you (`bob`): skybot acts only as you, "
            "so nothing was done."
        ) in bobs_tab
        assert squeue_state(held) == "PENDING"

        alices_tab = await click("alice", buttons[0])
        assert f"Cancelled job `{held}` `held` (as `alice`)." in alices_tab
        # Published before the next poll: the job is shown as cancelled, with no button left.
        assert f"Cancelled just now, Slurm is ending them: `{held}` `held`" in alices_tab
        assert "skybot_cancel_job" not in alices_tab
        await wait_for(
            lambda: squeue_state(held) in (None, "CANCELLED"), 30, "the job to be cancelled"
        )
        # Nothing was sent anywhere else: there was no response_url to send it to.
        assert slack.response_url_posts == []
