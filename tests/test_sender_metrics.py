"""Every answer Slack gives the outbox sender is counted once in skybot_slack_sends_total,
including those the SDK retries by itself (issue 27 item 9: three 429s counted as one)."""

from __future__ import annotations

import pytest

from bot.metrics import Metrics
from scheduler.sender_client import sender_client
from store.outbox import OutboxMessage
from store.writer import StoreWriter
from tests.support.outbox_sender import put, running, sender_for, wait_until_settled
from tests.support.slack_standin import SlackStandIn, SlackUser

# The SDK's Retry-After waits and the outbox's pass in fast-forwarded loop time.
pytestmark = pytest.mark.looptime


def sends(metrics: Metrics, result: str) -> float:
    value = metrics.registry.get_sample_value("skybot_slack_sends_total", {"result": result})
    return value or 0.0


async def test_each_429_counts_as_one_send(writer: StoreWriter) -> None:
    metrics = Metrics()
    async with SlackStandIn(users=[SlackUser("U1", "alice")]) as slack:
        client = sender_client(slack.bot_token, slack.api_url, metrics.observe_send)
        slack.fail_next("chat.postMessage", status=429, retry_after=1, times=3)
        await put(writer, OutboxMessage("m0", "U1", "hello"))
        async with running(sender_for(writer, client, observe=metrics.observe_send)):
            await wait_until_settled(writer)
        statuses = [c.status for c in slack.calls_to("chat.postMessage")]
    assert statuses == [429, 429, 429, 200]
    assert sends(metrics, "ratelimited") == 3
    assert sends(metrics, "ok") == 1
