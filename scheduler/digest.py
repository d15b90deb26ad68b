"""Posting the weekly lab digest to the channels that asked for it.

Runs on a weekly cron and once at start-up. Each run works out which week is due; if that
week's posting time is further back than `catch_up_hours` (skybot was down all day) it posts
nothing, so a late start never floods channels with stale digests. Each digest is two outbox
rows (the summary, then the week's GPU chart) under keys unique to lab, channel and calendar
week (the ISO year-week of the posting date, core/digest.py `calendar_week`): running twice
for the same week, or again after a restart in another time zone or across a DST change,
enqueues nothing new.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, tzinfo

import sqlite_utils
from apscheduler.triggers.cron import CronTrigger

from core.blocks import context, section
from core.chart_specs import LAB_GPUS, ChartSpec
from core.config_schema import Config
from core.digest import (
    WEEK,
    LabWeek,
    calendar_week,
    digest_key,
    digest_lines,
    digest_title,
    legacy_digest_key,
    week_ending,
)
from core.slack_text import literal
from scheduler.schedule import CalendarJob
from store.digests import DigestChannel, digest_channels, lab_week
from store.outbox import OutboxMessage, enqueue, known_keys
from store.writer import StoreWriter

log = logging.getLogger(__name__)


class WeeklyDigest:
    def __init__(
        self,
        config: Config,
        writer: StoreWriter,
        wake_sender: Callable[[], None],
        clock: Callable[[], float] = time.time,
        tz: tzinfo | None = None,
    ) -> None:
        self._config = config
        self._writer = writer
        self._wake_sender = wake_sender
        self._clock = clock
        # None: the host's zone, as the system says it is at each use (so with its DST
        # rules), not the fixed offset it had at start-up.
        self.tz = tz

    def calendar(self) -> CalendarJob:
        """At the configured time each week, and once at start-up to catch up on a digest
        missed while skybot was down."""
        digest = self._config.digest
        return CalendarJob(
            "weekly lab digest",
            self.run,
            CronTrigger(day_of_week=digest.weekday, hour=digest.hour),
            misfire_grace_seconds=int(digest.catch_up_hours * 3600) or 1,
        )

    async def run(self) -> int:
        """Enqueue the due week's digests; returns how many messages were new."""
        now = self._clock()
        settings = self._config.digest
        until = week_ending(now, settings.weekday, settings.hour, self.tz)
        week = datetime.fromtimestamp(until, self.tz).strftime("%Y-%m-%d %H:%M %Z")
        if now - until > settings.catch_up_hours * 3600:
            log.info(
                "weekly digest: the week to %s was due %.0f h ago, over catch_up_hours (%g): "
                "not posted late",
                week,
                (now - until) / 3600,
                settings.catch_up_hours,
            )
            return 0
        added = await self.post_week(until)
        if not added:
            log.info("weekly digest: the week to %s is already queued or posted", week)
        return added

    async def post_week(self, until: float) -> int:
        """Enqueue the digests of the week ending at `until` for every channel that had asked
        by then; returns how many messages were new."""
        added = await self._writer.run(self._enqueue_week, until)
        if added:
            log.info("weekly digest: %d messages queued for the week to %s", added, until)
            self._wake_sender()
        return added

    def _enqueue_week(self, db: sqlite_utils.Database, until: float) -> int:
        messages: list[OutboxMessage] = []
        for subscription in digest_channels(db):
            # A channel that asked after this week's posting time starts with the next one.
            if subscription.added_at > until:
                continue
            found = self._config.lab_anywhere(subscription.lab)
            if found is None:
                log.warning("digest for %s: no such lab in the config", subscription.lab)
                continue
            on, lab = found
            cluster = on.name
            week = lab_week(
                db, cluster, lab.name, lab.account, lab.storage_roots, until - WEEK, until
            )
            if known_keys(db, [legacy_digest_key(lab.name, subscription.channel, until)]):
                continue  # posted by a skybot from before keys named the calendar week
            messages += digest_messages(week, subscription, self.tz, self._config.digest.top_users)
        return enqueue(db, messages, self._clock())


def digest_messages(
    week: LabWeek, subscription: DigestChannel, tz: tzinfo | None, top_users: int
) -> list[OutboxMessage]:
    """The summary, then its chart, for one channel."""
    key = digest_key(week.lab, subscription.channel, calendar_week(week.until, tz))
    title = digest_title(week, tz)
    lines = digest_lines(week, top_users)
    footer = (
        f"Weekly digest, asked for by <@{subscription.added_by}>. "
        f"{literal(f'/sky digest {week.lab} off')} stops it."
    )
    blocks = [section(f"*{title}*"), *(section(line) for line in lines), context(footer)]
    text = "\n".join([title, *lines])
    chart = ChartSpec(LAB_GPUS, week.lab, week.since, week.until)
    # If the channel stops taking it (skybot removed, channel archived), whoever turned the
    # digest on gets it and why.
    return [
        OutboxMessage(key, subscription.channel, text, blocks, refused_to=subscription.added_by),
        OutboxMessage(
            f"{key}:chart",
            subscription.channel,
            f"*{literal(week.lab)}*: GPUs in use this week",
            chart=chart,
            refused_to=subscription.added_by,
        ),
    ]
