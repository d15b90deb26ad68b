"""What every button listener shares: who clicked what, and work that outlives the ack.

Bolt answers Slack only when a listener returns (process_before_response), so a listener
acks, hands the runner's work to `BackgroundWork`, and returns within Slack's 3 s.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from core.slack_text import literal

log = logging.getLogger(__name__)

# What no button module's pattern took (register_unknown_actions): not a button of its own.
ANY_ACTION = re.compile(".*")

LINK_FIRST = "skybot acts only as your own cluster account: link it first with `/sky link USER`."


def not_yours(label: str, owner: str, me: str) -> str:
    """The answer to a click on someone else's job (a forwarded or shared message)."""
    return (
        f"Job {literal(label)} belongs to {literal(owner)}, not to you ({literal(me)}): "
        "skybot acts only as you, so nothing was done."
    )


@dataclass(frozen=True, slots=True)
class Click:
    """One block_actions payload, reduced to what skybot checks again on every click."""

    team_id: str
    user_id: str
    action_id: str
    value: str
    # Slack sends none for a click on the Home tab: only message clicks can be answered there.
    has_response_url: bool
    # Where the clicked message is ("D…" for a DM with skybot); empty on the Home tab.
    channel_id: str = ""

    @property
    def in_dm(self) -> bool:
        return self.channel_id.startswith("D")


def click_of(body: dict[str, Any]) -> Click:
    action = (body.get("actions") or [{}])[0]
    user = body.get("user") or {}
    return Click(
        team_id=str((body.get("team") or {}).get("id") or user.get("team_id", "")),
        user_id=str(user.get("id", "")),
        action_id=str(action.get("action_id", "")),
        value=str(action.get("value", "")),
        has_response_url=bool(body.get("response_url")),
        channel_id=str(
            (body.get("channel") or {}).get("id")
            or (body.get("container") or {}).get("channel_id")
            or ""
        ),
    )


class BackgroundWork:
    """Tasks started after an ack, kept referenced until they finish (asyncio holds only weak
    references to running tasks)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def register_unknown_actions(app: AsyncApp) -> None:
    """Acks every action no other listener took (register it last: Bolt tries listeners in
    order). Unacked, Slack shows the clicker an error, and Bolt logs a multi-line "Unhandled
    request" block for each one: a stale button of an older skybot, or a forged payload,
    costs one warning line instead."""

    @app.action(ANY_ACTION)
    async def unknown_action(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        click = click_of(body)
        log.warning(
            "ignored a click on an action skybot does not have: %r from %s",
            click.action_id[:80],
            click.user_id[:20],
        )
