"""A burst of job ends for a few users does not starve anyone else's DM (issue 17).

1,000 job ends for five users, arriving a few per user per poll (so each is its own DM, as
today's grouping decides), then one job end for a sixth user: the sixth user's DM goes out
within one send interval, not behind the burst. A fake clock drives the sender; Slack is the
stand-in.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from core.cluster_config import ClusterConfig
from core.summary_notices import MAX_SEPARATE_NOTICES
from scheduler.watchers import process_transitions
from store.outbox import outbox_rows
from store.writer import StoreWriter
from tests.support.factories import CLUSTER, job
from tests.support.job_dm_inputs import Links, config_with
from tests.support.outbox_sender import TEAM, client_for, delivered, sender_for
from tests.support.slack_standin import SlackStandIn, SlackUser
from tests.support.slurm_polls import save_slurm_poll

BURST_USERS = [SlackUser(f"UBURST{i}", f"burst{i}") for i in range(5)]
SIXTH = SlackUser("USIXTH", "sixth")
SEND_INTERVAL = 1.0  # Slack's pace for one channel


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    async with SlackStandIn(users=[*BURST_USERS, SIXTH]) as standin:
        yield standin


async def _end_jobs(
    writer: StoreWriter,
    links: Links,
    users: list[SlackUser],
    per_user: int,
    first_id: int,
    at: float,
) -> int:
    """One poll in which `per_user` jobs of each user ended; its DMs decided as the bot does."""
    ended = [
        replace(
            job(first_id + n * len(users) + i, user=u.name, start_time=1),
            state="COMPLETED",
            end_time=int(at),
        )
        for n in range(per_user)
        for i, u in enumerate(users)
    ]
    await writer.run(save_slurm_poll, [], ended, [], at)
    await process_transitions(
        writer, links, config_with(default_preference="all"), ClusterConfig(CLUSTER)
    )
    return len(ended)


async def test_one_users_dm_is_not_starved_behind_a_thousand_others(
    writer: StoreWriter, slack: SlackStandIn
) -> None:
    links = Links({u.name: [(TEAM, u.id)] for u in [*BURST_USERS, SIXTH]})
    ended, next_id, at = 0, 1, 100.0
    while ended < 1000:
        ended += await _end_jobs(writer, links, BURST_USERS, MAX_SEPARATE_NOTICES, next_id, at)
        next_id, at = next_id + 100, at + 15
    await _end_jobs(writer, links, [SIXTH], 1, next_id, at)
    queued = await writer.run(outbox_rows, "queued")
    # Grouped per user and poll as today: each of the thousand ends is its own DM.
    assert len(queued) == 1001
    assert queued[-1]["target"] == SIXTH.id

    clock = FakeClock()
    clock.now = max(row["next_attempt_at"] for row in queued)  # all due from here
    sender = sender_for(
        writer, client_for(slack), per_channel_per_second=1 / SEND_INTERVAL, clock=clock
    )
    started = clock.now
    sixth_sent_at = None
    while sixth_sent_at is None and clock.now <= started + 10 * SEND_INTERVAL:
        await sender.send_due()
        if any(channel == SIXTH.id for channel, _ in delivered(slack)):
            sixth_sent_at = clock.now
        clock.now += SEND_INTERVAL / 4
    assert sixth_sent_at is not None and sixth_sent_at - started <= SEND_INTERVAL
    # Within Slack's pace: no burst user got more than one DM per send interval.
    per_user = {u.id: sum(c == u.id for c, _ in delivered(slack)) for u in BURST_USERS}
    elapsed = sixth_sent_at - started
    assert all(n <= 1 + elapsed / SEND_INTERVAL for n in per_user.values()), per_user
