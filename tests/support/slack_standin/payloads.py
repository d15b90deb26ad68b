"""Payloads and Socket Mode envelopes built the way Slack builds them.

Shared by the Socket Mode pusher and the HTTP signing helper so both transports deliver the
same slash-command fields (all strings, as Slack form-encodes them, even inside JSON).
"""

from __future__ import annotations

import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any


def new_trigger_id() -> str:
    """Slack trigger ids look like ``<digits>.<digits>.<hex>``; bots only pass them back."""
    return f"{int(time.time())}.{secrets.randbelow(10**12)}.{secrets.token_hex(16)}"


def slash_command_payload(
    *,
    command: str,
    text: str,
    user_id: str,
    user_name: str,
    channel_id: str,
    channel_name: str,
    team_id: str,
    team_domain: str,
    api_app_id: str,
    response_url: str,
    trigger_id: str | None = None,
    token: str = "standin-verification-token",
    is_enterprise_install: bool = False,
    enterprise_id: str | None = None,
    enterprise_name: str | None = None,
) -> dict[str, str]:
    """The slash-command fields in Slack's order; booleans are the strings "true"/"false"."""
    payload = {
        "token": token,
        "team_id": team_id,
        "team_domain": team_domain,
        "channel_id": channel_id,
        "channel_name": channel_name,
        "user_id": user_id,
        "user_name": user_name,
        "command": command,
        "text": text,
        "api_app_id": api_app_id,
        "is_enterprise_install": "true" if is_enterprise_install else "false",
        "response_url": response_url,
        "trigger_id": trigger_id or new_trigger_id(),
    }
    if enterprise_id is not None:
        payload["enterprise_id"] = enterprise_id
        payload["enterprise_name"] = enterprise_name or enterprise_id
    return payload


def new_envelope_id() -> str:
    return str(uuid.uuid4())


def slash_commands_envelope(payload: dict[str, str]) -> dict[str, Any]:
    """Socket Mode wraps the slash command; the ack may carry a response payload."""
    return {
        "envelope_id": new_envelope_id(),
        "payload": payload,
        "type": "slash_commands",
        "accepts_response_payload": True,
    }


def events_api_envelope(
    event: dict[str, Any],
    *,
    team_id: str,
    api_app_id: str,
    bot_user_id: str,
    event_id: str | None = None,
    retry_attempt: int = 0,
    retry_reason: str = "",
) -> dict[str, Any]:
    """An Events API ``event_callback`` in its Socket Mode envelope (no response payload)."""
    event_time = int(time.time())
    payload = {
        "token": "standin-verification-token",
        "team_id": team_id,
        "context_team_id": team_id,
        "context_enterprise_id": None,
        "api_app_id": api_app_id,
        "event": event,
        "type": "event_callback",
        "event_id": event_id or f"Ev{secrets.token_hex(5).upper()}",
        "event_time": event_time,
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": team_id,
                "user_id": bot_user_id,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": f"4-{secrets.token_hex(16)}",
    }
    return {
        "envelope_id": new_envelope_id(),
        "payload": payload,
        "type": "events_api",
        "accepts_response_payload": False,
        "retry_attempt": retry_attempt,
        "retry_reason": retry_reason,
    }


def app_home_opened_event(
    *, user_id: str, channel_id: str, app_id: str, team_id: str, tab: str = "home"
) -> dict[str, Any]:
    """``app_home_opened`` as Slack sends it the first time (no ``view`` published yet)."""
    event: dict[str, Any] = {
        "type": "app_home_opened",
        "user": user_id,
        "channel": channel_id,
        "tab": tab,
        "event_ts": f"{time.time():.6f}",
    }
    if tab == "messages":
        return event
    event["view"] = {"type": "home", "team_id": team_id, "app_id": app_id, "blocks": []}
    return event


def hello_message(*, app_id: str, num_connections: int) -> dict[str, Any]:
    """First frame on every Socket Mode connection."""
    return {
        "type": "hello",
        "num_connections": num_connections,
        "debug_info": {
            "host": "applink-standin",
            "build_number": 1,
            "approximate_connection_time": 18060,
        },
        "connection_info": {"app_id": app_id},
    }


def disconnect_message(reason: str) -> dict[str, Any]:
    """Slack's request to reconnect ("warning", "refresh_requested", "link_disabled")."""
    return {"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-standin"}}


@dataclass(frozen=True)
class ButtonClick:
    """Who clicked which button, in which workspace and app: the same wherever it is."""

    team_id: str
    user_id: str
    user_name: str
    api_app_id: str
    action_id: str
    value: str


def block_actions_payload(
    click: ButtonClick, *, response_url: str, channel_id: str = "C1", ephemeral: bool = True
) -> dict[str, Any]:
    """A button click (`block_actions`) on a message (an ephemeral answer, or a DM the bot
    posted), as Slack sends it."""
    return {
        **_button_click(click),
        "container": {"type": "message", "is_ephemeral": ephemeral, "channel_id": channel_id},
        "channel": {"id": channel_id, "name": "general"},
        "response_url": response_url,
    }


def home_block_actions_payload(click: ButtonClick, *, view: dict[str, Any]) -> dict[str, Any]:
    """A button click on the user's Home tab, as Slack sends it: the container is the view,
    the published view comes along, and there is NO response_url (Slack gives one only for
    clicks in messages) and no channel."""
    return {
        **_button_click(click),
        "container": {"type": "view", "view_id": view.get("id", "")},
        "view": view,
    }


def _button_click(click: ButtonClick) -> dict[str, Any]:
    """What every `block_actions` payload of one button click holds, wherever the button is."""
    team, user = click.team_id, click.user_name
    return {
        "type": "block_actions",
        "team": {"id": team, "domain": "standin"},
        "user": {"id": click.user_id, "username": user, "name": user, "team_id": team},
        "api_app_id": click.api_app_id,
        "token": "standin-verification-token",
        "trigger_id": new_trigger_id(),
        "actions": [
            {
                "type": "button",
                "action_id": click.action_id,
                "block_id": uuid.uuid4().hex[:5],
                "value": click.value,
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def interactive_envelope(payload: dict[str, Any]) -> dict[str, Any]:
    """Socket Mode wraps interactivity payloads as `interactive`."""
    return {
        "envelope_id": new_envelope_id(),
        "payload": payload,
        "type": "interactive",
        "accepts_response_payload": False,
    }
