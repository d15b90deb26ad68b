"""What every button shares: who clicked what, what a click is answered with, and work that
outlives the ack.

Each button is a `Button` (its kind from core/buttons/, its `clicked` coroutine and what the
clicker is told when that fails), one module per button in handlers/buttons/;
handlers/buttons/registry.py registers them. Bolt answers Slack only when a listener returns
(process_before_response), so the listener acks, hands the work to `BackgroundWork`, and
returns within Slack's 3 s.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from core.blocks import Block
from core.buttons import ButtonKind
from core.slack_text import literal
from core.view import ClusterView
from handlers.services import Services

log = logging.getLogger(__name__)

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
    # The button sat in a message only the clicker sees (a private answer).
    ephemeral: bool = False

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
        ephemeral=_in_ephemeral(body),
    )


def _in_ephemeral(body: dict[str, Any]) -> bool:
    container = body.get("container") or {}
    return bool(container.get("is_ephemeral")) or container.get("type") != "message"


@dataclass(frozen=True)
class Answer:
    """What a click is answered with, through the click's response_url (or, for a click on
    the Home tab, which has none, as a notice on top of the tab published again)."""

    text: str
    blocks: list[Block] = field(default_factory=list)
    # False: a new message under the clicked one rather than in its place.
    replace_original: bool = True
    # For a new message: "ephemeral" (the clicker only) or "in_channel".
    response_type: str | None = None

    @property
    def notice(self) -> str:
        """What the Home tab shows: the answer's first line."""
        return self.text.split("\n", 1)[0]

    def message(self) -> dict[str, Any]:
        """respond()'s keyword arguments."""
        message: dict[str, Any] = {"text": self.text, "replace_original": self.replace_original}
        if self.blocks:
            message["blocks"] = self.blocks
        if self.response_type is not None:
            message["response_type"] = self.response_type
        return message


@dataclass(frozen=True)
class Button:
    """One kind of button's handling: `clicked` checks everything again and says what the
    click did; `failed` is what the clicker is told when it raised."""

    kind: ButtonKind
    clicked: Callable[[Click, ClusterView, Services], Awaitable[Answer]]
    failed: Callable[[Click], str]


# Answers a click on the Home tab (client, team, user, outcome): Slack gives such a click no
# response_url, so the tab is published again with the outcome on top (handlers/home.py).
HomeAnswer = Callable[[AsyncWebClient, str, str, str], Awaitable[None]]


class BackgroundWork:
    """Tasks started after an ack, kept referenced until they finish (asyncio holds only weak
    references to running tasks)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
