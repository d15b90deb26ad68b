"""An outbox sender at test pace against the Slack stand-in, and what it delivered.

The sender reads the event loop's time through `loop_clock`, so a test marked looptime
passes the sender's seconds-long waits in milliseconds."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from scheduler.outbox_policy import SenderPacing
from scheduler.outbox_sender import OutboxSender
from store.outbox import OutboxMessage, enqueue, outbox_rows
from store.writer import StoreWriter
from tests.support.cluster import wait_for
from tests.support.slack_standin import SlackStandIn

PACING_FIELDS = {field.name for field in dataclasses.fields(SenderPacing)}
TEAM = "T0STANDIN"


def client_for(slack: SlackStandIn, rate_limit_retries: int = 1) -> AsyncWebClient:
    return slack.web_client(
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=rate_limit_retries)]
    )


def loop_clock() -> Callable[[], float]:
    """Wall-clock time (as the outbox stores it) that moves with the event loop's time."""
    loop = asyncio.get_running_loop()
    offset = time.time() - loop.time()
    return lambda: offset + loop.time()


def sender_for(writer: StoreWriter, client: AsyncWebClient, **kwargs: Any) -> OutboxSender:
    """A sender at test pace: `kwargs` are SenderPacing's fields, the clock, charts, observe."""
    kwargs.setdefault("per_channel_per_second", 20.0)
    kwargs.setdefault("retry_base_seconds", 0.2)
    kwargs.setdefault("idle_seconds", 0.2)
    paced = {name: kwargs.pop(name) for name in list(kwargs) if name in PACING_FIELDS}
    kwargs.setdefault("clock", loop_clock())
    return OutboxSender(writer, client, SenderPacing(**paced), **kwargs)


@asynccontextmanager
async def running(sender: OutboxSender) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(sender.run(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=10)


async def put(writer: StoreWriter, *messages: OutboxMessage) -> int:
    return await writer.run(enqueue, messages, time.time())


async def states(writer: StoreWriter) -> list[tuple[str, str]]:
    return [(r["key"], r["state"]) for r in await writer.run(outbox_rows)]


async def wait_until_settled(writer: StoreWriter, timeout: float = 30.0) -> None:
    """Until nothing is queued any more."""

    async def settled() -> bool:
        return not await writer.run(outbox_rows, "queued")

    try:
        await wait_for(settled, timeout, "nothing queued in the outbox", interval=0.05)
    except AssertionError as still_queued:
        raise AssertionError(f"{still_queued}: {await states(writer)}") from None


def delivered(slack: SlackStandIn) -> list[tuple[str, str]]:
    """(channel as addressed, text) of every chat.postMessage Slack accepted, in order."""
    return [
        (c.params["channel"], c.params["text"]) for c in slack.calls_to("chat.postMessage") if c.ok
    ]
