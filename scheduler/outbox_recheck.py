"""Has Slack already got this DM? Asked before sending again a DM whose last attempt's outcome
skybot never learned (it died waiting for Slack's answer, or the answer was lost).

chat.postMessage has no idempotency key, so each DM carries its outbox id and key in its
message `metadata` (event_type `skybot_outbox`). Before a DM whose row has `sending_since` goes out
again, the DM's history since that attempt (a minute earlier, for clock skew) is read with
`include_all_metadata` (the `im:history` scope), and a message carrying that key settles the
row as sent. Charts (files_upload_v2 takes no metadata) and channel posts are not looked up: those
can still arrive twice after a crash mid-send.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from store.outbox import QueuedMessage, is_direct_message

log = logging.getLogger(__name__)

OUTBOX_EVENT = "skybot_outbox"
# Slack's ts and this host's clock need not agree to the second.
CLOCK_SKEW_SECONDS = 60.0
HISTORY_PAGES = 5
# Errors meaning this token may not read the DM's history (an app installed before skybot
# asked for im:history): the DM is sent as before, with a warning, rather than held forever.
CANNOT_LOOK = frozenset({"missing_scope", "not_allowed_token_type", "channel_not_found"})


def outbox_metadata(message: QueuedMessage) -> dict[str, Any]:
    """The message metadata that names the outbox row a DM was sent for."""
    return {"event_type": OUTBOX_EVENT, "event_payload": {"id": message.id, "key": message.key}}


async def already_delivered(
    client: AsyncWebClient, message: QueuedMessage
) -> tuple[str, str] | None:
    """(channel, ts) of the DM Slack already has for this row, or None (send it).

    Network and server errors propagate: the sender retries later, still unsure."""
    if message.sending_since is None or not is_direct_message(message):
        return None
    try:
        opened = await client.conversations_open(users=message.target)
        channel = str(opened["channel"]["id"])
        cursor: str | None = None
        for _ in range(HISTORY_PAGES):
            page = await client.conversations_history(
                channel=channel,
                oldest=f"{message.sending_since - CLOCK_SKEW_SECONDS:.6f}",
                include_all_metadata=True,
                limit=200,
                cursor=cursor,
            )
            for posted in page.get("messages") or []:
                if _names_row(posted.get("metadata"), message):
                    return channel, str(posted.get("ts") or "")
            cursor = str((page.get("response_metadata") or {}).get("next_cursor") or "")
            if not page.get("has_more") or not cursor:
                return None
    except SlackApiError as error:
        code = str(error.response.get("error") or "")
        if code not in CANNOT_LOOK:
            raise
        log.warning(
            "outbox %s: cannot read the DM's history to see if Slack already has it (%s; "
            "skybot needs the im:history scope): sending it again",
            message.key,
            code,
        )
        return None
    log.warning("outbox %s: more history than skybot reads; sending it again", message.key)
    return None


def _names_row(metadata: object, message: QueuedMessage) -> bool:
    if not isinstance(metadata, dict) or metadata.get("event_type") != OUTBOX_EVENT:
        return False
    # The key names the notice (one row per key); the id alone could name another message in
    # a database restored from a backup, whose ids went on from where the backup stopped.
    payload = metadata.get("event_payload")
    return isinstance(payload, dict) and payload.get("key") == message.key
