"""The outbox sender's policy (scheduler/outbox_sender.py acts on it): how fast it sends and
how patiently it retries, and what Slack's answers mean for a message: retried, parked,
redirected to whoever asked for it, or the whole sender paused."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.blocks import section
from core.config_schema import NotificationsConfig
from core.slack_text import literal
from store.outbox import OutboxMessage, QueuedMessage


@dataclass(frozen=True)
class SenderPacing:
    """How fast the sender goes, and how patiently it retries."""

    # Slack's own limit is about one message per second per channel.
    per_channel_per_second: float = 1.0
    retry_base_seconds: float = 5.0
    retry_max_seconds: float = 900.0
    # Slack unreachable or failing (5xx): retried at least this often, to catch its return.
    connection_retry_max_seconds: float = 60.0
    # How long a pass waits with nothing due before looking at the outbox again.
    idle_seconds: float = 30.0
    token_probe_seconds: float = 5.0
    token_probe_max_seconds: float = 60.0

    @classmethod
    def from_config(cls, notifications: NotificationsConfig) -> SenderPacing:
        return cls(
            per_channel_per_second=notifications.messages_per_second_per_channel,
            token_probe_seconds=notifications.token_probe_seconds,
            token_probe_max_seconds=notifications.token_probe_max_seconds,
        )


# chat.postMessage errors that no retry can fix.
PERMANENT_ERRORS = frozenset(
    {
        "user_not_found",
        "users_not_found",
        "channel_not_found",
        "is_archived",
        "not_in_channel",
        "user_disabled",
        "cannot_dm_bot",
        "messages_tab_disabled",
        "restricted_action",
        "restricted_action_read_only_channel",
        "restricted_action_thread_only_channel",
        "restricted_action_non_threadable_channel",
        "invalid_blocks",
        "invalid_blocks_format",
        "invalid_arguments",
        "msg_too_long",
        "no_text",
        "too_many_attachments",
        "duplicate_channel_not_found",
    }
)
# Errors about the bot token itself (deactivated, revoked, expired, missing): every call would
# fail the same way, so they pause the sender instead of condemning one message.
# `missing_scope` is not one of them: a scope is per method (a missing files:write stops charts,
# not DMs), so it stays a per-message error, retried and in the end parked with its reason.
TOKEN_ERRORS = frozenset(
    {"account_inactive", "invalid_auth", "token_revoked", "token_expired", "not_authed"}
)
# Other ok:false errors (a missing scope, …) may be fixed by the admins, so they are retried
# with back-off, but not forever.
MAX_ATTEMPTS_UNKNOWN_ERROR = 12


def send_outcome(status: int, code: str) -> str:
    """The metrics' name for a failed attempt: "ratelimited", "http_5xx" or Slack's code."""
    if status == 429:
        return "ratelimited"
    return f"http_{status}" if status >= 500 else code


def redirect_target(message: QueuedMessage) -> str:
    """Who gets the message if its channel refuses it ("" for nobody: it is parked only)."""
    return message.refused_to if message.refused_to != message.target else ""


def to_whoever_asked(message: QueuedMessage, code: str) -> OutboxMessage:
    """The refused message, in the DM of whoever asked for it, saying why it is there."""
    why = (
        f"I could not post this in <#{message.target}> (Slack said {literal(code)}): skybot "
        "must be a member there, `/invite @skybot`. Here it is."
    )
    blocks = [section(why), *message.blocks] if message.blocks else None
    return OutboxMessage(
        f"{message.key}:refused",
        message.refused_to,
        f"{why}\n{message.text}",
        blocks,
        message.chart,
    )


def retry_after(headers: Mapping[str, Any] | None) -> int:
    """Slack's Retry-After (seconds), at least 1. aiohttp gives a case-insensitive multidict;
    other transports may give a plain dict or a list per header."""
    value: object = None
    for name, raw in (headers or {}).items():
        if str(name).lower() == "retry-after":
            value = raw
    if isinstance(value, list | tuple):
        value = value[0] if value else None
    try:
        return max(1, int(str(value)))
    except (TypeError, ValueError):
        return 1
