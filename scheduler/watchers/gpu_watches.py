"""The GPU-watch watcher: after each Slurm poll, end the watches that came true or expired.

What is free and each lab's headroom come from the view (worked out once per snapshot, on
the loop); which watches end is core/gpu_watch.py's `watch_outcomes`. On the writer's thread,
in one transaction, each ending watch is marked ended and its one DM enqueued: a watch can
never send two, however often its GPUs come and go, and a crash replays nothing twice.
"""

from __future__ import annotations

import time

import sqlite_utils

from core.gpu_watch import (
    FIRED,
    Outcome,
    expired_text,
    fired_text,
    headroom_by_lab,
    view_free_index,
    watch_outcomes,
)
from core.view import ClusterView
from store.outbox import OutboxMessage
from store.watches import active_watches, end_watches
from store.writer import StoreWriter


async def check_gpu_watches(
    writer: StoreWriter,
    view: ClusterView,
    cluster: str,
    now: float | None = None,
    shown: str = "",
) -> int:
    """End the watches of `cluster` that its snapshot (in `view`) decides; returns how many
    DMs were enqueued."""
    if view.snapshot.source("slurm").taken_at is None:
        return 0
    now = time.time() if now is None else now
    index = view_free_index(view)
    headroom = headroom_by_lab(view)

    def decide(db: sqlite_utils.Database) -> int:
        with db.atomic():
            outcomes = watch_outcomes(active_watches(db, cluster), index, headroom, now)
            return end_watches(db, [_ended(o, shown) for o in outcomes], now)

    return await writer.run(decide)


def _ended(outcome: Outcome, shown: str) -> tuple[int, str, OutboxMessage]:
    watch = outcome.watch
    text = fired_text(outcome, shown) if outcome.kind == FIRED else expired_text(watch, shown)
    # One key per watch, whatever it came to: the outbox's unique key is a second guard.
    key = f"watch:{watch.id}:{watch.team_id}:{watch.user_id}"
    return watch.id, outcome.kind, OutboxMessage(key, watch.user_id, text)
