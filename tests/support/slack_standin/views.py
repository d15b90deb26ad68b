"""Modals: `views.open` as Slack answers it, and a user submitting one (`view_submission`).

Slack keeps each open modal; a submission sends the view back with `state.values` (one entry
per input block: `{block_id: {action_id: {"type": ..., "value" | "selected_option": ...}}}`)
and the app's HTTP answer (or Socket Mode ack) says what happens next: nothing (the modal
closes), `{"response_action": "errors", "errors": {block_id: text}}` (the modal stays, each
text under its block), or `{"response_action": "update", "view": {...}}` (the modal becomes
that view). https://api.slack.com/surfaces/modals#displaying_errors and
https://api.slack.com/reference/interaction-payloads/views.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from .signing import SignedRequest

# A trigger id is good for 3 s after Slack sent it; ours start with the second they were made.
TRIGGER_SECONDS = 3.0


class ViewError(Exception):
    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


@dataclass
class OpenModal:
    """One modal as Slack holds it: the view the app gave (with Slack's fields added), what
    it became, and whether it is still open."""

    view: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)
    open: bool = True
    # The last submission's errors ({} when it had none).
    errors: dict[str, str] = field(default_factory=dict)
    trigger_id: str = ""


def trigger_age(trigger_id: str, now: float | None = None) -> float | None:
    """Seconds since a stand-in trigger id was made (None: not one of ours)."""
    head = trigger_id.split(".", 1)[0]
    if not head.isdigit():
        return None
    return (time.time() if now is None else now) - int(head)


def stored_view(view: dict[str, Any], team_id: str, app_id: str, bot_id: str) -> dict[str, Any]:
    """The view with the fields Slack adds to it (id, hash, state, ...)."""
    return {
        **view,
        "id": f"V{secrets.token_hex(5).upper()}",
        "team_id": team_id,
        "state": {"values": {}},
        "hash": secrets.token_hex(8),
        "private_metadata": view.get("private_metadata", ""),
        "callback_id": view.get("callback_id", ""),
        "app_id": app_id,
        "bot_id": bot_id,
        "root_view_id": None,
        "previous_view_id": None,
    }


def check_modal(view: Any) -> dict[str, Any]:
    """Refuse what Slack refuses with invalid_arguments (or a too-long metadata)."""
    if not isinstance(view, dict) or view.get("type") != "modal" or "title" not in view:
        raise ViewError("invalid_arguments")
    if len(str(view.get("private_metadata", ""))) > 3000:
        raise ViewError("invalid_arguments")
    if len(view.get("blocks", [])) > 100:
        raise ViewError("invalid_arguments")
    return view


def state_values(view: dict[str, Any], answers: dict[str, str | None]) -> dict[str, Any]:
    """`state.values` for a user who left every input as the view set it, except `answers`
    (block id -> the value typed or the option value chosen; None: left empty)."""
    values: dict[str, Any] = {}
    for block in view.get("blocks", []):
        if block.get("type") != "input":
            continue
        element = block["element"]
        kind = element["type"]
        chosen = answers.get(block["block_id"], _initial(element))
        if kind in ("static_select", "external_select"):
            option = next(
                (o for o in element.get("options", []) if o["value"] == chosen),
                {"text": {"type": "plain_text", "text": str(chosen)}, "value": chosen},
            )
            entry = {"type": kind, "selected_option": option if chosen is not None else None}
        else:
            entry = {"type": kind, "value": chosen}
        # Slack names an element without an action_id itself.
        action_id = element.get("action_id") or f"{block['block_id']}.slack-named"
        values[block["block_id"]] = {action_id: entry}
    return values


def _initial(element: dict[str, Any]) -> str | None:
    if "initial_option" in element:
        return str(element["initial_option"]["value"])
    value = element.get("initial_value")
    return str(value) if value is not None else None


def view_submission_payload(
    view: dict[str, Any],
    values: dict[str, Any],
    *,
    team_id: str,
    user_id: str,
    user_name: str,
    api_app_id: str,
) -> dict[str, Any]:
    """A `view_submission` as Slack sends it."""
    return {
        "type": "view_submission",
        "team": {"id": team_id, "domain": "standin"},
        "user": {"id": user_id, "username": user_name, "name": user_name, "team_id": team_id},
        "api_app_id": api_app_id,
        "token": "standin-verification-token",
        "trigger_id": f"{int(time.time())}.{secrets.randbelow(10**12)}.{uuid.uuid4().hex}",
        "view": {**view, "state": {"values": values}},
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }


def apply_answer(modal: OpenModal, answer: dict[str, Any] | None) -> None:
    """What Slack does with the app's answer to a submission."""
    action = (answer or {}).get("response_action")
    modal.errors = {}
    if action == "errors":
        modal.errors = dict(answer["errors"]) if answer else {}
        inputs = {b.get("block_id") for b in modal.view.get("blocks", []) if b["type"] == "input"}
        if not modal.errors or set(modal.errors) - inputs:
            # Slack shows the user "We had some trouble connecting" and keeps nothing.
            raise ViewError("invalid errors: each key must be an input block of the view")
    elif action == "update":
        modal.history.append(modal.view)
        new = answer["view"] if answer else {}
        modal.view = {**new, "id": modal.view["id"], "team_id": modal.view["team_id"]}
    else:
        modal.open = False


async def post_signed(url: str, signed: SignedRequest, timeout: float) -> dict[str, Any] | None:
    """POST a signed interactivity payload as Slack does; the app's answer (None: empty
    body). An answer later than `timeout`, or not HTTP 200, fails as Slack would show it."""
    async with aiohttp.ClientSession() as session:
        async with asyncio.timeout(timeout):
            async with session.post(url, data=signed.body, headers=signed.headers) as response:
                body = await response.text()
                if response.status != 200:
                    raise ViewError(f"HTTP {response.status}: {body[:200]}")
    return json.loads(body) if body.strip() else None
