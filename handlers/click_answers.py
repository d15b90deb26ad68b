"""Answers that follow an ack (a click's outcome, a slow command's answer) always arrive.

They go through the request's response_url, which Slack may answer with a 500 or a 429, or
not at all. Bolt's `respond` reports that only in its return value, so an outcome was lost
without a trace (issue 27 item 6: "Cancelled" never shown, nothing logged). Here each failure
is logged and retried with back-off; when the response_url still fails, or refuses for good
(404: expired, used up), the answer goes to the user's DM through the outbox, which keeps it
across a restart and retries Slack on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncRespond

from core.blocks import Block
from store.outbox import OutboxMessage, enqueue
from store.writer import StoreWriter

log = logging.getLogger(__name__)

# Seconds before each retry: a Slack hiccup is usually over within seconds, and an outcome
# that waits longer goes by DM (the outbox retries for as long as it takes).
RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0)
NOTE = "_skybot could not update the message you clicked or typed in, so here is its answer:_"

# Queues a DM (dedup key, Slack user id, text, blocks): OutboxDms in production.
DmQueue = Callable[[str, str, str, list[Block] | None], Awaitable[None]]


class OutboxDms:
    """A DmQueue that writes into the outbox and wakes its sender."""

    def __init__(self, writer: StoreWriter, wake_sender: Callable[[], None]) -> None:
        self._writer = writer
        self._wake_sender = wake_sender

    async def __call__(self, key: str, user_id: str, text: str, blocks: list[Block] | None) -> None:
        message = OutboxMessage(key=key, target=user_id, text=text, blocks=blocks)
        await self._writer.run(enqueue, [message], time.time())
        self._wake_sender()


async def answer_later(
    respond: AsyncRespond,
    message: dict[str, Any],
    *,
    user_id: str,
    dm: DmQueue | None,
    what: str,
    delays: tuple[float, ...] = RETRY_DELAYS,
) -> bool:
    """Post `message` (respond()'s keyword arguments) to the response_url, retried; failing
    that, DM it to `user_id`. True if the response_url took it."""
    attempts = len(delays) + 1
    for attempt in range(1, attempts + 1):
        status, detail, asked_wait = await _post(respond, message)
        if status == 200:
            if attempt > 1:
                log.info("%s reached Slack at attempt %d of %d", what, attempt, attempts)
            return True
        retryable = status is None or status == 429 or status >= 500
        log.warning(
            "response_url for %s answered %s (%s), attempt %d of %d",
            what,
            status if status is not None else "nothing",
            detail,
            attempt,
            attempts,
        )
        if not retryable or attempt == attempts:
            break
        # A 429 says how long to wait (Retry-After): never sooner than that.
        await asyncio.sleep(max(delays[attempt - 1], asked_wait))
    await _by_dm(respond, message, user_id=user_id, dm=dm, what=what)
    return False


async def _post(respond: AsyncRespond, message: dict[str, Any]) -> tuple[int | None, str, float]:
    """(status, what Slack said, the Retry-After of a 429 or 0)."""
    try:
        response = await respond(**message)
    except Exception as error:  # the network, a timeout: Slack may not have seen it
        return None, repr(error)[:200], 0.0
    wait = _retry_after(response.headers) if response.status_code == 429 else 0.0
    return response.status_code, str(response.body)[:200], wait


def _retry_after(headers: Any) -> float:
    """Slack's Retry-After (seconds), 1 if it says none or nothing readable."""
    for name, value in (headers or {}).items():
        if str(name).lower() == "retry-after":
            with contextlib.suppress(TypeError, ValueError):
                return max(1.0, float(value[0] if isinstance(value, list) else value))
    return 1.0


async def _by_dm(
    respond: AsyncRespond,
    message: dict[str, Any],
    *,
    user_id: str,
    dm: DmQueue | None,
    what: str,
) -> None:
    text = str(message.get("text", ""))
    if dm is None or not user_id:
        log.error("%s is lost: its response_url failed and there is no DM to send it to", what)
        return
    # One DM per response_url: each click and each command has its own.
    url = respond.response_url or ""
    key = "answer:" + hashlib.sha256(url.encode()).hexdigest()[:24]
    blocks = message.get("blocks")
    if blocks:
        blocks = [{"type": "context", "elements": [{"type": "mrkdwn", "text": NOTE}]}, *blocks]
    try:
        await dm(key, user_id, f"{NOTE}\n{text}", blocks)
    except Exception:
        log.exception("%s is lost: its response_url failed and queueing the DM failed", what)
        return
    log.warning("%s goes to %s by DM instead of the response_url", what, user_id)
