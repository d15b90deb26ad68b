"""Clicking a bot's buttons through the Slack stand-in, as a user would, and finding them."""

from __future__ import annotations

import json
from typing import Any

from tests.support.bot_process import SLACK_IDS
from tests.support.slack_standin import SlackStandIn


def buttons(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for b in answer.get("blocks", []) if b["type"] == "actions" for e in b["elements"]]


async def click(slack: SlackStandIn, user: str, button: dict[str, Any], in_dm: bool = False) -> str:
    """The answer to `user`'s click on `button`: under a private answer, or in their DM."""
    channel = slack.dm_channel_for(SLACK_IDS[user]) if in_dm else None
    payload = slack.block_action_payload(
        user_id=SLACK_IDS[user],
        action_id=button["action_id"],
        value=button["value"],
        channel_id=channel,
    )
    await slack.send_block_action(payload, timeout=3)
    post = await slack.wait_for_response_url_post(url=payload["response_url"], timeout=60)
    return str(post.body["text"])


def dm_buttons(slack: SlackStandIn, job_id: int) -> list[dict[str, Any]]:
    """The buttons of the failure DM about `job_id`."""
    for call in slack.calls_to("chat.postMessage"):
        if call.ok and f"Job {job_id} " in str(call.params.get("text")):
            if "failed" not in str(call.params.get("text")):
                continue
            blocks = call.params.get("blocks")
            blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
            return [e for b in blocks or [] if b["type"] == "actions" for e in b["elements"]]
    return []
