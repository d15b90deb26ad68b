"""Slack's rate limits kept wherever skybot calls Slack (issue 40), against the stand-in.

- A 429 that says `Retry-After: 10` means no call to that method for 10 s: it was retried
  after ~1 s and ~1.5 s inside slack_sdk, because the sender's retry handler wrapper did not
  pass on the wait of the handler it wrapped; and the other channels' DMs went on at once.
- A burst of thousands of DMs keeps to chat.postMessage's workspace-wide limit ("several
  hundred messages per minute"; skybot takes 200).

Waits run in the event loop's time, which looptime fast-forwards; the stand-in notes when
each request arrived on that clock.
"""

from __future__ import annotations

import asyncio

import pytest

from bot.app import web_client
from bot.config import Secrets
from scheduler.sender_client import sender_client
from scheduler.slack_limits import POST_MESSAGE_PER_MINUTE
from store.outbox import OutboxMessage
from store.writer import StoreWriter
from tests.support.outbox_sender import delivered, put, running, sender_for, wait_until_settled
from tests.support.slack_standin import Call, SlackStandIn, SlackUser

pytestmark = pytest.mark.looptime

USERS = [SlackUser(f"U{i}", f"user{i}") for i in range(3)]


def _quiet_after_each_429(calls: list[Call], seconds: float) -> list[str]:
    """Each call that came within `seconds` of a 429 to its method, in words."""
    return [
        f"{call.method} {call.at - limited.at:.2f} s after a 429"
        for limited in calls
        if limited.status == 429
        for call in calls
        if call.method == limited.method and limited.at < call.at < limited.at + seconds
    ]


@pytest.mark.parametrize("storm", [1, 4], ids=["retried-in-the-sdk", "outlasting-its-retries"])
async def test_a_429_with_retry_after_10_means_no_call_to_that_method_for_10_s(
    writer: StoreWriter, storm: int
) -> None:
    async with SlackStandIn(users=USERS) as slack:
        client = sender_client(slack.bot_token, slack.api_url)
        slack.fail_next("chat.postMessage", status=429, retry_after=10, times=storm)
        # Three people's DMs: Slack's limit is the method's, not one channel's.
        await put(writer, *(OutboxMessage(f"m{u.id}", u.id, f"hello {u.name}") for u in USERS))
        async with running(sender_for(writer, client)):
            await wait_until_settled(writer, timeout=60)
        calls = slack.calls_to("chat.postMessage")
    assert [c.status for c in calls].count(429) == storm
    assert _quiet_after_each_429(calls, 10.0) == []
    assert sorted(delivered(slack)) == [(u.id, f"hello {u.name}") for u in USERS]


async def test_the_shared_client_holds_every_caller_of_a_rate_limited_method() -> None:
    """The bot's own client (users.info for the email rule, and Bolt's per-request clients,
    which take its retry handlers): a second caller waits out the first one's Retry-After."""
    async with SlackStandIn(users=USERS) as slack:
        secrets = Secrets(bot_token=slack.bot_token, app_token="", api_url=slack.api_url)
        client = web_client(secrets)
        slack.fail_next("users.info", status=429, retry_after=10)
        first = asyncio.create_task(client.users_info(user="U0"))
        await slack.wait_for_call("users.info")
        await asyncio.sleep(1.0)
        second = await client.users_info(user="U1")
        assert (await first)["ok"] and second["ok"]
        calls = slack.calls_to("users.info")
    assert [c.status for c in calls] == [429, 200, 200]
    assert _quiet_after_each_429(calls, 10.0) == []


async def test_a_burst_of_thousands_of_dms_keeps_to_slacks_workspace_limit(
    writer: StoreWriter,
) -> None:
    users = [SlackUser(f"U{i:05d}", f"user{i}") for i in range(2_000)]
    async with SlackStandIn(users=users) as slack:
        client = sender_client(slack.bot_token, slack.api_url)
        await put(writer, *(OutboxMessage(f"m{u.id}", u.id, "job ended") for u in users))
        async with running(sender_for(writer, client)):
            # Waited for in Slack's time (minutes), without polling the outbox meanwhile.
            await slack.wait_for_calls("chat.postMessage", len(users), timeout=3_600)
            await wait_until_settled(writer)
        calls = slack.calls_to("chat.postMessage")
    assert len(delivered(slack)) == len(users)
    times = sorted(c.at for c in calls)
    busiest = max(sum(1 for t in times[i:] if t < start + 60.0) for i, start in enumerate(times))
    assert busiest <= POST_MESSAGE_PER_MINUTE, f"{busiest} chat.postMessage calls in 60 s"
    # Paced, not stalled: 2,000 DMs at the limit take about ten minutes of Slack's time.
    assert times[-1] - times[0] < 2_000 / POST_MESSAGE_PER_MINUTE * 60 * 1.2
