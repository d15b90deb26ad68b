"""How many times the poll -> DM walk calls the writer (issue 41): one call per poll saves the
changes, the lab usage and the job DMs they decide; the sender claims each message in one call
and records its outcome in one more. Every writer call is a hop to the writer's thread and
a turn in its queue behind everything else the bot writes, so these counts may only go down.

The writer here is the real one, wrapped to name each function it is given; Slurm is
stand-in commands printing 22.05's recorded JSON, Slack the stand-in.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

import pytest
import sqlite_utils

from scheduler.outbox_policy import SenderPacing
from scheduler.outbox_sender import OutboxSender
from store.outbox import OutboxMessage, enqueue, outbox_rows
from store.writer import StoreWriter
from tests.support.empty_database import empty_database
from tests.support.slack_standin import SlackStandIn, SlackUser

P = ParamSpec("P")
T = TypeVar("T")


class CountingWriter(StoreWriter):
    """The store's writer, naming each function it runs, in order."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.calls: list[str] = []

    async def run(
        self,
        fn: Callable[Concatenate[sqlite_utils.Database, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        self.calls.append(getattr(fn, "__name__", repr(fn)))
        return await super().run(fn, *args, **kwargs)

    def taken(self) -> list[str]:
        """The calls since the last look."""
        calls, self.calls = self.calls, []
        return calls


@pytest.fixture
def counting(tmp_path: Path) -> AsyncIterator[CountingWriter]:
    writer = CountingWriter(empty_database(tmp_path / "skybot.db"))
    yield writer
    writer.close()


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    async with SlackStandIn(users=[SlackUser("U1", "alice"), SlackUser("U2", "bob")]) as standin:
        yield standin


async def test_the_sender_claims_a_message_in_one_call_and_records_it_in_one(
    counting: CountingWriter, slack: SlackStandIn
) -> None:
    """Two DMs: per DM one claim (the load and the mark `sending` together) and one record,
    and one claim that finds nothing due. Before: load, mark_sending, mark_sent per DM."""
    messages = [OutboxMessage("a", "U1", "one"), OutboxMessage("b", "U2", "two")]
    await counting.run(enqueue, messages, time.time())
    counting.taken()
    sender = OutboxSender(counting, slack.web_client(), SenderPacing(per_channel_per_second=20))
    report = await sender.send_due()
    assert report.sent == 2
    assert counting.taken() == [
        "claim_next_due",
        "mark_sent",
        "claim_next_due",
        "mark_sent",
        "claim_next_due",
    ]
    assert [row["state"] for row in await counting.run(outbox_rows)] == ["sent", "sent"]
