"""Watchers: turn what the pollers stored into messages in the outbox.

They only read snapshots and transitions (the pollers are the one way data comes in) and
write just their own bookkeeping plus outbox rows, in one transaction per decision:

- the job notifier reads job_transitions rows past its cursor, decides who gets which DM
  (core/job_notices.py) and advances the cursor in the transaction that enqueues the DMs,
  so no transition is missed or notified twice across restarts;
- the storage watcher decides hoarding pings and full-filesystem warnings
  (core/storage_alerts.py) from the latest storage snapshot, storing the new alert state in
  the transaction that enqueues the messages for the alert channel.

Delivery is the sender's job (scheduler/outbox_sender.py); `Watchers` wakes it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import sqlite_utils

from bot.config import Config
from core.cap_waits import cap_wait_notices, next_episodes
from core.job_notices import MAX_SEPARATE_NOTICES, JobNotice, decide_job_notice, digest_notice
from core.lab_usage import idle_by_type, lab_usage
from core.records import FINAL_STATES
from core.snapshot import ClusterSnapshot
from core.storage_alerts import (
    FillPolicy,
    HoardPolicy,
    filesystem_alerts,
    hoarding_alerts,
)
from core.transitions import REQUEUED, Transition
from store.alerts import (
    advance_cursor,
    load_cap_episodes,
    load_cursor,
    load_fill_state,
    load_hoard_state,
    load_preferences,
    save_cap_episodes,
    save_fill_state,
    save_hoard_state,
)
from store.outbox import OutboxMessage, enqueue, prune_outbox
from store.snapshots import decode_job, load_snapshot
from store.writer import StoreWriter

log = logging.getLogger(__name__)

DAY = 86400.0
# Transitions turned into notices per transaction; a backlog is worked through in batches.
BATCH = 2000

SlackKey = tuple[str, str]


class SlackDirectory(Protocol):
    """Who to DM or mention for a cluster user (handlers.identity.IdentityDirectory)."""

    def slack_users_of(self, cluster_user: str) -> list[SlackKey]: ...


@dataclass(frozen=True)
class NoticeSettings:
    """What the job notifier needs from the config, in a form the writer thread can use."""

    cluster: str
    default_preference: str
    preemptible: frozenset[str]

    @classmethod
    def from_config(cls, config: Config) -> NoticeSettings:
        n = config.notifications
        return cls(
            cluster=n.cluster_name,
            default_preference=n.default_preference,
            preemptible=frozenset({config.slurm.overcap_partition, *n.preemptible_partitions}),
        )


# ------------------------------------------------------------------------------ job DMs


async def process_transitions(
    writer: StoreWriter, identity: SlackDirectory, config: Config, *, batch: int = BATCH
) -> int:
    """Enqueue DMs for every job transition not processed yet; returns how many were enqueued.

    Safe to call at any time and any number of times (after each Slurm poll, at start-up):
    each transition is processed once, whatever crashes in between.
    """
    settings = NoticeSettings.from_config(config)
    total = 0
    while True:
        users, through = await writer.run(pending_transition_users, batch)
        if through is None:
            return total
        # Resolved here, on the event loop that owns the identity directory.
        targets = {user: identity.slack_users_of(user) for user in users}
        total += await writer.run(notify_transitions, targets, through, settings)


def pending_transition_users(
    db: sqlite_utils.Database, batch: int = BATCH
) -> tuple[set[str], int | None]:
    """Cluster users of the next batch of unprocessed transitions, and the batch's last id."""
    rows = db.execute(
        "SELECT id, user FROM job_transitions WHERE id > ? ORDER BY id LIMIT ?",
        [load_cursor(db), batch],
    ).fetchall()
    if not rows:
        return set(), None
    return {r[1] for r in rows}, rows[-1][0]


def notify_transitions(
    db: sqlite_utils.Database,
    targets: Mapping[str, Sequence[SlackKey]],
    through: int,
    settings: NoticeSettings,
    now: float | None = None,
) -> int:
    """Decide the DMs for transitions up to id `through`, enqueue them and move the cursor,
    all in one transaction. Returns how many messages were newly enqueued."""
    with db.atomic():
        cursor = load_cursor(db)
        if through <= cursor:
            return 0
        prefs = load_preferences(db)
        per_target: dict[SlackKey, list[tuple[int, JobNotice]]] = {}
        for row_id, transition, at in _transitions(db, cursor, through):
            slack_keys = targets.get(transition.job.user, ())
            started = (
                interrupted_run_start(db, row_id, transition, at)
                if slack_keys and transition.to_state == REQUEUED
                else None
            )
            for slack_key in slack_keys:
                pref = prefs.get(slack_key, settings.default_preference)
                notice = decide_job_notice(
                    transition,
                    pref,
                    now=at,
                    preemptible=settings.preemptible,
                    cluster=settings.cluster,
                    run_started=started,
                )
                if notice is not None:
                    per_target.setdefault(slack_key, []).append((row_id, notice))
        messages = [
            message
            for slack_key, items in per_target.items()
            for message in _messages(slack_key, items, settings)
        ]
        added = enqueue(db, messages, time.time() if now is None else now)
        if not advance_cursor(db, cursor, through):
            raise RuntimeError("job transition cursor moved during notification")
        return added


def _transitions(
    db: sqlite_utils.Database, after: int, through: int
) -> list[tuple[int, Transition, float]]:
    """Transitions worth a look (final states and requeues) in (after, through], by id."""
    notable = sorted(FINAL_STATES | {REQUEUED})
    marks = ", ".join("?" for _ in notable)
    rows = db.execute(
        "SELECT id, from_state, to_state, restarts, at, record FROM job_transitions "
        f"WHERE id > ? AND id <= ? AND to_state IN ({marks}) ORDER BY id",
        [after, through, *notable],
    ).fetchall()
    return [(r[0], Transition(decode_job(r[5]), r[1], r[2], r[3]), r[4]) for r in rows]


def interrupted_run_start(
    db: sqlite_utils.Database, row_id: int, transition: Transition, at: float
) -> float | None:
    """When the run a requeue interrupted had started, from the job's earlier transitions.

    The requeued job's own record cannot say: Slurm gives a pending job the forecast start
    of its next run. The poll that saw the run start (or first saw it running) recorded it.
    """
    rows = db.execute(
        "SELECT record FROM job_transitions WHERE job_id = ? AND id < ? AND restarts < ? "
        "ORDER BY id DESC LIMIT 10",
        [transition.job.job_id, row_id, transition.restarts],
    ).fetchall()
    for (record,) in rows:
        start = decode_job(record).start_time
        if start and start <= at:
            return float(start)
    return None


def _messages(
    slack_key: SlackKey, items: list[tuple[int, JobNotice]], settings: NoticeSettings
) -> list[OutboxMessage]:
    team_id, user_id = slack_key
    if len(items) <= MAX_SEPARATE_NOTICES:
        return [
            OutboxMessage(f"{n.key}:{team_id}:{user_id}", user_id, n.text, n.blocks)
            for _, n in items
        ]
    first, last = items[0][0], items[-1][0]
    key = f"jobs:{settings.cluster}:{first}-{last}:{team_id}:{user_id}"
    digest = digest_notice([n for _, n in items], key)
    return [OutboxMessage(digest.key, user_id, digest.text, digest.blocks)]


# ------------------------------------------------------------------------------ storage alerts


@dataclass(frozen=True)
class StorageSettings:
    channel: str
    hoard: HoardPolicy
    fill: FillPolicy
    lab_of_root: dict[str, str]
    keep_days: int

    @classmethod
    def from_config(cls, config: Config) -> StorageSettings:
        n = config.notifications
        return cls(
            channel=config.slack.alert_channel,
            hoard=HoardPolicy(n.hoard_threshold_bytes, n.hoard_top_n, n.hoard_regrow_fraction),
            fill=FillPolicy(n.filesystem_thresholds, n.rearm_margin),
            lab_of_root={root: lab.name for lab in config.labs for root in lab.storage_roots},
            keep_days=config.database.history_days,
        )


async def check_storage(
    writer: StoreWriter,
    identity: SlackDirectory,
    config: Config,
    snapshot: ClusterSnapshot | None = None,
) -> int:
    """Enqueue hoarding pings and full-filesystem warnings for the latest storage snapshot.

    Returns how many messages were newly enqueued. `snapshot` is the one the bot already
    holds in memory; without it the latest committed snapshot is read.
    """
    if snapshot is None:
        snapshot = await writer.run(load_snapshot)
    if snapshot.source("storage").taken_at is None:
        return 0  # never scanned: no data is not "empty disks"
    owners = {d.owner for d in snapshot.directories}
    slack_ids = {o: [uid for _, uid in identity.slack_users_of(o)] for o in owners}
    return await writer.run(
        storage_alerts_in_db, snapshot, slack_ids, StorageSettings.from_config(config)
    )


def storage_alerts_in_db(
    db: sqlite_utils.Database,
    snapshot: ClusterSnapshot,
    slack_ids: Mapping[str, Sequence[str]],
    settings: StorageSettings,
    now: float | None = None,
) -> int:
    """Decide, store the new alert state and enqueue the messages, in one transaction."""
    now = time.time() if now is None else now
    with db.atomic():
        hoard_state, hoard = hoarding_alerts(
            load_hoard_state(db),
            snapshot.directories,
            snapshot.filesystems,
            snapshot.previous_kib,
            settings.hoard,
            settings.lab_of_root,
            slack_ids,
        )
        fill_state, fill = filesystem_alerts(
            load_fill_state(db),
            snapshot.filesystems,
            snapshot.directories,
            snapshot.previous_kib,
            settings.fill,
            settings.lab_of_root,
        )
        save_hoard_state(db, hoard_state)
        save_fill_state(db, fill_state)
        # Filesystem warnings first: they are the more urgent.
        alerts = [*fill, *hoard]
        added = enqueue(
            db, (OutboxMessage(a.key, settings.channel, a.text, a.blocks) for a in alerts), now
        )
        prune_outbox(db, now - settings.keep_days * DAY)
        return added


# ------------------------------------------------------------------------------ cap waits


async def check_cap_waits(
    writer: StoreWriter,
    identity: SlackDirectory,
    config: Config,
    snapshot: ClusterSnapshot,
    now: float | None = None,
) -> int:
    """DM users whose jobs have waited behind their lab's cap for long; returns how many."""
    if config.notifications.cap_wait_minutes <= 0 or snapshot.source("slurm").taken_at is None:
        return 0
    now = time.time() if now is None else now
    # Off the loop: at 100,000 jobs this is tens of milliseconds that commands would wait.
    usages = await asyncio.to_thread(
        lambda: [
            lab_usage(
                lab.name,
                lab.account,
                snapshot.cap_for(lab.account),
                snapshot.jobs,
                snapshot.members.get(lab.account, ()),
                config.slurm.overcap_account,
            )
            for lab in config.labs
        ]
    )
    flags = f"--partition={config.slurm.overcap_partition} --account={config.slurm.overcap_account}"

    def decide(db: sqlite_utils.Database) -> int:
        with db.atomic():
            episodes = next_episodes(load_cap_episodes(db), usages, now)
            save_cap_episodes(db, episodes)
            notices = cap_wait_notices(
                episodes,
                usages,
                now,
                60 * config.notifications.cap_wait_minutes,
                idle_by_type(snapshot.nodes),
                flags,
            )
            messages = [
                OutboxMessage(f"{n.key}:{team}:{user_id}", user_id, n.text)
                for n in notices
                for team, user_id in targets.get(n.user, ())
            ]
            return enqueue(db, messages, now)

    waiting_users = {j.user for u in usages for j in u.pending_at_cap}
    targets = {user: identity.slack_users_of(user) for user in waiting_users}
    return await writer.run(decide)


# ------------------------------------------------------------------------------ wiring


class Watchers:
    """The scheduler's after-poll hooks: run a watcher, wake the sender if it enqueued."""

    def __init__(
        self,
        config: Config,
        writer: StoreWriter,
        identity: SlackDirectory,
        wake_sender: Callable[[], None] | None = None,
        snapshot: Callable[[], ClusterSnapshot] | None = None,
    ) -> None:
        self._config = config
        self._writer = writer
        self._identity = identity
        self._wake = wake_sender
        self._snapshot = snapshot

    async def after_slurm_poll(self) -> int:
        try:
            added = await process_transitions(self._writer, self._identity, self._config)
            if self._snapshot is not None:
                added += await check_cap_waits(
                    self._writer, self._identity, self._config, self._snapshot()
                )
        except Exception:
            log.exception("job notifier failed; the transitions stay queued for the next poll")
            return 0
        self._woken(added)
        return added

    async def after_storage_poll(self) -> int:
        try:
            snapshot = self._snapshot() if self._snapshot is not None else None
            added = await check_storage(self._writer, self._identity, self._config, snapshot)
        except Exception:
            log.exception("storage watcher failed; it will look again after the next poll")
            return 0
        self._woken(added)
        return added

    def _woken(self, added: int) -> None:
        if added and self._wake is not None:
            self._wake()
