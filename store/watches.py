"""GPU watches (`/sky watch`): adding, listing, removing, and ending them with their DM.

A watch is active while `ended_at` is NULL. `end_watches` ends each watch and enqueues its
one DM in the same transaction, and only if the watch was still active: a watch removed by
its owner a moment before, or ended by a replayed decision after a crash, sends nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from core.gpu_watch import Watch
from store.outbox import OutboxMessage, enqueue

_COLUMNS = (
    "id, team_id, user_id, cluster_user, gpu_type, count, overcap, lab, partition, account, "
    "created_at, expires_at"
)


class TooManyWatches(Exception):
    """The user already has the most active watches allowed."""


@dataclass(frozen=True, slots=True)
class NewWatch:
    team_id: str
    user_id: str
    cluster_user: str
    gpu_type: str
    count: int
    overcap: bool
    lab: str
    partition: str
    account: str


def add_watch(
    db: sqlite_utils.Database,
    cluster: str,
    new: NewWatch,
    now: float,
    seconds: float,
    max_per_user: int,
) -> Watch:
    """Store a watch of `cluster`'s GPUs that ends at `now + seconds`; TooManyWatches past
    `max_per_user` (counted over every cluster)."""
    with db.atomic():
        if len(active_watches_of(db, new.team_id, new.user_id)) >= max_per_user:
            raise TooManyWatches(max_per_user)
        cursor = db.execute(
            "INSERT INTO gpu_watches (cluster, team_id, user_id, cluster_user, gpu_type, count, "
            "overcap, lab, partition, account, created_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                cluster,
                new.team_id,
                new.user_id,
                new.cluster_user,
                new.gpu_type,
                new.count,
                int(new.overcap),
                new.lab,
                new.partition,
                new.account,
                now,
                now + seconds,
            ],
        )
        watch_id = cursor.lastrowid
    assert watch_id is not None
    return Watch(
        watch_id,
        new.team_id,
        new.user_id,
        new.cluster_user,
        new.gpu_type,
        new.count,
        new.overcap,
        new.lab,
        new.partition,
        new.account,
        now,
        now + seconds,
    )


def active_watches(db: sqlite_utils.Database, cluster: str) -> list[Watch]:
    """Every active watch of the cluster's GPUs, oldest first (the order free GPUs are shared
    out in)."""
    rows = db.execute(
        f"SELECT {_COLUMNS} FROM gpu_watches WHERE ended_at IS NULL AND cluster = ? ORDER BY id",
        [cluster],
    ).fetchall()
    return [_watch(row) for row in rows]


def active_watches_of(db: sqlite_utils.Database, team_id: str, user_id: str) -> list[Watch]:
    """The user's active watches, on every cluster (a watch is removed by its id)."""
    rows = db.execute(
        f"SELECT {_COLUMNS} FROM gpu_watches WHERE ended_at IS NULL AND team_id = ? "
        "AND user_id = ? ORDER BY id",
        [team_id, user_id],
    ).fetchall()
    return [_watch(row) for row in rows]


def remove_watches(
    db: sqlite_utils.Database, team_id: str, user_id: str, watch_id: int | None, now: float
) -> int:
    """End the user's watch `watch_id` (None: all of them) without a DM; how many ended.
    Only the owner's own watches: an id of someone else's matches nothing."""
    where = "ended_at IS NULL AND team_id = ? AND user_id = ?"
    params: list[object] = [now, team_id, user_id]
    if watch_id is not None:
        where += " AND id = ?"
        params.append(watch_id)
    with db.atomic():
        cursor = db.execute(
            f"UPDATE gpu_watches SET ended_at = ?, outcome = 'removed' WHERE {where}", params
        )
        return cursor.rowcount


def end_watches(
    db: sqlite_utils.Database,
    ended: Sequence[tuple[int, str, OutboxMessage]],
    now: float,
) -> int:
    """End each (watch id, outcome, its DM) still active and enqueue its DM, all in one
    transaction; returns how many DMs were enqueued."""
    with db.atomic():
        messages = []
        for watch_id, outcome, message in ended:
            cursor = db.execute(
                "UPDATE gpu_watches SET ended_at = ?, outcome = ? "
                "WHERE id = ? AND ended_at IS NULL",
                [now, outcome, watch_id],
            )
            if cursor.rowcount:
                messages.append(message)
        return enqueue(db, messages, now)


def _watch(row: Sequence[Any]) -> Watch:
    # Column order is _COLUMNS'; only `overcap` is stored as another type (0/1).
    (wid, team, user, cluster_user, gpu_type, count, overcap, lab, part, account, made, ends) = row
    return Watch(
        wid, team, user, cluster_user, gpu_type, count, bool(overcap), lab, part, account, made,
        ends,
    )  # fmt: skip
