"""The storage watcher: hoarding pings and full-filesystem warnings for the alert channel.

It decides (core/storage_alerts.py) from the latest storage snapshot, storing the new alert
state in the transaction that enqueues the messages, so state and messages never disagree.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import sqlite_utils

from core.cluster_config import ClusterConfig
from core.shared_config import SharedConfig, shown_name
from core.snapshot import ClusterSnapshot
from core.storage_alerts import (
    filesystem_alerts,
    hoarding_alerts,
)
from scheduler.watchers.directory import SlackDirectory
from store.alerts import load_fill_state, load_hoard_state, save_fill_state, save_hoard_state
from store.outbox import OutboxMessage, enqueue, prune_outbox
from store.snapshots import load_snapshot
from store.writer import StoreWriter

DAY = 86400.0


async def check_storage(
    writer: StoreWriter,
    identity: SlackDirectory,
    shared: SharedConfig,
    cluster: ClusterConfig,
    snapshot: ClusterSnapshot | None = None,
) -> int:
    """Enqueue hoarding pings and full-filesystem warnings for the latest storage snapshot.

    Returns how many messages were newly enqueued. `snapshot` is the one the bot already
    holds in memory; without it `cluster`'s latest committed snapshot is read.
    """
    if snapshot is None:
        snapshot = await writer.run(load_snapshot, cluster.name)
    if snapshot.source("storage").taken_at is None:
        return 0  # never scanned: no data is not "empty disks"
    owners = {d.owner for d in snapshot.directories}
    slack_ids = {o: [uid for _, uid in identity.slack_users_of(o)] for o in owners}
    return await writer.run(storage_alerts_in_db, snapshot, slack_ids, shared, cluster)


def storage_alerts_in_db(
    db: sqlite_utils.Database,
    snapshot: ClusterSnapshot,
    slack_ids: Mapping[str, Sequence[str]],
    shared: SharedConfig,
    on: ClusterConfig,
    now: float | None = None,
) -> int:
    """Decide, store the new alert state and enqueue the messages, in one transaction: all
    of it `on`'s (the snapshot is its, and the labs its roots belong to), named in the text
    where skybot serves several clusters."""
    now = time.time() if now is None else now
    rules, cluster = shared.notifications, on.name
    lab_of_root = {root: lab.name for lab in on.labs for root in lab.storage_roots}
    where = {"cluster": cluster, "shown": shown_name(shared, on)}
    with db.atomic():
        hoard_state, hoard = hoarding_alerts(
            load_hoard_state(db, cluster), snapshot, rules, lab_of_root, slack_ids, **where
        )
        fill_state, fill = filesystem_alerts(
            load_fill_state(db, cluster), snapshot, rules, lab_of_root, **where
        )
        save_hoard_state(db, cluster, hoard_state)
        save_fill_state(db, cluster, fill_state)
        # Filesystem warnings first: they are the more urgent.
        alerts = [*fill, *hoard]
        channel = shared.slack.alert_channel
        added = enqueue(db, (OutboxMessage(a.key, channel, a.text, a.blocks) for a in alerts), now)
        prune_outbox(db, now - shared.database.history_days * DAY)
        return added
