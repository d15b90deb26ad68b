"""A DM whose send's outcome the sender never learned is looked up in Slack, not sent blind.

In-process, against the Slack stand-in, in fast-forwarded loop time (looptime); the kill -9
cases run the real bot process in tests/test_outbox_exactly_once.py.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from store.outbox import OutboxMessage, mark_sending, outbox_rows
from store.writer import StoreWriter
from tests.support.cluster import wait_for
from tests.support.outbox_sender import client_for, loop_clock, put, sender_for, wait_until_settled
from tests.support.slack_standin import SlackStandIn, SlackUser

pytestmark = pytest.mark.looptime

TEXT = "Job 9092 (train) completed."


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    async with SlackStandIn(users=[SlackUser("U1", "alice")]) as standin:
        yield standin


def copies(slack: SlackStandIn) -> list[dict[str, object]]:
    return [m for m in slack.messages.values() if m.get("text") == TEXT]


async def test_an_answer_later_than_the_clients_timeout_gives_one_copy(
    writer: StoreWriter, slack: SlackStandIn
) -> None:
    """Slack stores the DM but answers after the client gave up: a network error, retried, and
    the retry finds the first copy instead of posting a second."""
    slack.answer_late("chat.postMessage", 20)
    await put(writer, OutboxMessage("job:9092:end", "U1", TEXT))
    client = slack.web_client(timeout=5, retry_handlers=[])
    sender = sender_for(writer, client)
    first = await sender.send_due()
    assert first.retried == 1 and len(copies(slack)) == 1

    async def sent() -> bool:
        if not await writer.run(outbox_rows, "queued"):
            return True
        await sender.send_due()
        return False

    await wait_for(sent, 60, "the retry to find the first copy", 1, clock=loop_clock())
    (row,) = await writer.run(outbox_rows)
    (copy,) = copies(slack)
    assert (row["state"], row["slack_ts"]) == ("sent", copy["ts"])
    assert copy["metadata"] == {
        "event_type": "skybot_outbox",
        "event_payload": {"id": row["id"], "key": "job:9092:end"},
    }
    assert slack.calls_to("conversations.history")


async def test_a_dm_not_in_the_history_is_sent(writer: StoreWriter, slack: SlackStandIn) -> None:
    """Marked sending, but the call never left (killed before it): one copy goes out."""
    await put(writer, OutboxMessage("job:1:end", "U1", TEXT))
    await writer.run(mark_sending, 1, loop_clock()())
    await sender_for(writer, client_for(slack)).send_due()
    await wait_until_settled(writer)
    assert len(copies(slack)) == 1
    assert slack.calls_to("conversations.history")


async def test_without_im_history_the_dm_is_sent_again_with_a_warning(
    writer: StoreWriter, slack: SlackStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    """An app installed before skybot asked for im:history: the DM is not held for ever."""
    slack.fail_next("conversations.history", error="missing_scope")
    await put(writer, OutboxMessage("job:1:end", "U1", TEXT))
    await writer.run(mark_sending, 1, loop_clock()())
    with caplog.at_level(logging.WARNING):
        report = await sender_for(writer, client_for(slack)).send_due()
    assert report.sent == 1 and len(copies(slack)) == 1
    assert "im:history" in caplog.text
