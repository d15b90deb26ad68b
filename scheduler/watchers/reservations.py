"""Maintenance reservations newly seen, announced once each in the alert channel with their
window (core/reservations.py words it; store/limits.py remembers what was announced)."""

from __future__ import annotations

import time

from core.cluster_config import ClusterConfig
from core.reservations import announcement
from core.shared_config import SharedConfig, shown_name
from core.view import ClusterView
from store.limits import announce_once
from store.outbox import OutboxMessage
from store.writer import StoreWriter


async def announce_reservations(
    writer: StoreWriter, shared: SharedConfig, view: ClusterView, where: ClusterConfig
) -> int:
    """Enqueue the announcement of every maintenance reservation not yet over that was not
    announced before; returns how many were enqueued."""
    snapshot = view.snapshot
    if snapshot.source("limits").taken_at is None:
        return 0
    now = time.time()
    channel, cluster = shared.slack.alert_channel, where.name
    shown = shown_name(shared, where)
    due = [
        (
            r,
            OutboxMessage(
                f"reservation:{cluster}:{r.name}:{r.start}", channel, announcement(r, now, shown)
            ),
        )
        for r in snapshot.limits.reservations
        if r.maintenance and r.end > now
    ]
    if not due:
        return 0
    added: int = await writer.run(announce_once, cluster, due, now)
    return added
