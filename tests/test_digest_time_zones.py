"""The weekly digest is keyed by the lab's calendar week, so a time-zone change across a
restart never posts a week twice or skips one (issue 40: posted twice, 5 h apart, after the
host went from UTC to America/New_York across a restart; its key was the epoch of the local
"Monday 09:00", which the new zone put 5 h later).

Each "bot" is a WeeklyDigest as skybot builds it (the host's zone, from TZ), run as its
calendar runs it: once at start-up, then at each Monday 09:00 of the zone it started in.
The restart falls on either side of the digest's hour.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from bot.config import load_config
from core.digest import week_ending
from scheduler.digest import WeeklyDigest
from store.digests import DigestChannel, add_digest_channel
from store.outbox import OutboxMessage, enqueue, outbox_rows
from store.writer import StoreWriter

HOUR = 3600.0
WEEK = 7 * 24 * HOUR
# Monday 23 Nov 2026, 00:00 UTC; the bot runs for three weeks from there.
START = datetime(2026, 11, 23, tzinfo=UTC).timestamp()
END = START + 3 * WEEK
ZONES = ("UTC", "America/New_York")


@pytest.fixture
def host_zone() -> Iterator[None]:
    """The process's TZ, put back afterwards."""
    before = os.environ.get("TZ")
    yield
    if before is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = before
    time.tzset()


def _set_zone(zone: str) -> None:
    os.environ["TZ"] = zone
    time.tzset()


def _fire_times(since: float, until: float) -> list[float]:
    """When the calendar fires (Monday 09:00 in the host's zone) in (since, until]."""
    times = {week_ending(t, "mon", 9, None) for t in _hours(since, until + HOUR)}
    return sorted(t for t in times if since < t <= until)


def _hours(since: float, until: float) -> Iterator[float]:
    t = since
    while t < until:
        yield t
        t += HOUR


async def _run_bot(writer: StoreWriter, zone: str, started: float, stopped: float) -> None:
    _set_zone(zone)
    clock = started
    digest = WeeklyDigest(load_config(None), writer, lambda: None, lambda: clock)
    await digest.run()  # the catch-up run at start-up
    for clock in _fire_times(started, stopped):  # noqa: B007 - the digest reads `clock`
        await digest.run()


@pytest.mark.parametrize("before_after", [ZONES, ZONES[::-1]], ids=["UTC-to-NY", "NY-to-UTC"])
@pytest.mark.parametrize("restart_hours", [-0.5, 0.5, 3.0, 6.0])
async def test_a_time_zone_change_across_a_restart_posts_each_week_once(
    writer: StoreWriter, host_zone: None, before_after: tuple[str, str], restart_hours: float
) -> None:
    await writer.run(
        add_digest_channel, DigestChannel("hoffman-lab", "C0LAB", "T1", "UALICE", START - WEEK)
    )
    # The restart: the second week's Monday, `restart_hours` from the digest's hour (09:00)
    # as the first zone tells it.
    _set_zone(before_after[0])
    restart = week_ending(START + WEEK + 20 * HOUR, "mon", 9, None) + restart_hours * HOUR
    await _run_bot(writer, before_after[0], START, restart)
    await _run_bot(writer, before_after[1], restart, END)

    posts = [r for r in await writer.run(outbox_rows) if r["chart"] is None]
    when = [datetime.fromtimestamp(r["created_at"], UTC).strftime("%a %d %b %H:%M") for r in posts]
    weeks = [datetime.fromtimestamp(r["created_at"], UTC).isocalendar()[1] for r in posts]
    # Mondays 23 Nov, 30 Nov and 7 Dec: one post each, none twice.
    assert weeks == [48, 49, 50], when


async def test_a_bot_running_across_a_dst_change_posts_each_week_once(
    writer: StoreWriter, host_zone: None
) -> None:
    """New York moves its clocks on Sunday 14 Mar 2027: the digest of Monday 15 Mar is still
    posted at 09:00 (the zone's rules, not the offset it had at start-up), and only once."""
    started = datetime(2027, 3, 1, tzinfo=UTC).timestamp()
    await writer.run(
        add_digest_channel, DigestChannel("hoffman-lab", "C0LAB", "T1", "UALICE", started - WEEK)
    )
    await _run_bot(writer, "America/New_York", started, started + 3 * WEEK)
    posts = [r for r in await writer.run(outbox_rows) if r["chart"] is None]
    when = [datetime.fromtimestamp(r["created_at"], UTC).strftime("%a %d %b %H:%M") for r in posts]
    assert when == ["Mon 01 Mar 14:00", "Mon 08 Mar 14:00", "Mon 15 Mar 13:00"]


async def test_a_week_posted_under_the_old_key_is_not_posted_again(
    writer: StoreWriter, host_zone: None
) -> None:
    """Upgraded within a digest's catch-up window: the week the older skybot posted (keyed by
    the epoch of its hour) is not posted again under its calendar-week key."""
    _set_zone("UTC")
    monday_9 = datetime(2026, 11, 30, 9, tzinfo=UTC).timestamp()
    await writer.run(
        add_digest_channel, DigestChannel("hoffman-lab", "C0LAB", "T1", "UALICE", START)
    )
    old = OutboxMessage(f"digest:hoffman-lab:C0LAB:{int(monday_9)}", "C0LAB", "last week")
    await writer.run(enqueue, [old], monday_9)
    digest = WeeklyDigest(load_config(None), writer, lambda: None, lambda: monday_9 + HOUR)
    assert await digest.run() == 0
    assert await digest.post_week(monday_9 + WEEK) == 2  # the next week as usual
