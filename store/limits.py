"""Reading back the cluster's limits and reservations (core/slurm_limits.py): one record per
cluster, replaced whole by the limits poll (store/caps_and_storage.py `save_limits`)."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
import sqlite_utils

from core.slurm_limits import Reservation, SlurmLimits
from store.outbox import OutboxMessage, enqueue

_decoder = msgspec.json.Decoder(SlurmLimits)


def encode_limits(limits: SlurmLimits) -> str:
    return msgspec.json.encode(limits).decode()


def load_limits(db: sqlite_utils.Database, cluster: str) -> SlurmLimits:
    """The last limits read; empty (no partition, QOS or reservation known) before the first
    or if the stored record cannot be read (the next poll writes it again)."""
    row = db.execute("SELECT record FROM slurm_limits WHERE cluster = ?", [cluster]).fetchone()
    if row is None:
        return SlurmLimits()
    try:
        return _decoder.decode(row[0])
    except msgspec.DecodeError:
        return SlurmLimits()


def announce_once(
    db: sqlite_utils.Database,
    cluster: str,
    reservations: Iterable[tuple[Reservation, OutboxMessage]],
    now: float,
) -> int:
    """Enqueue each reservation's announcement unless it was announced before (by name and
    start: a reservation moved to another window is news again); the bookkeeping and the
    messages commit together, so a restart neither repeats nor loses one."""
    added = 0
    with db.atomic():
        for reservation, message in reservations:
            cursor = db.execute(
                "INSERT OR IGNORE INTO announced_reservations (cluster, name, start, "
                "announced_at) VALUES (?, ?, ?, ?)",
                [cluster, reservation.name, reservation.start, now],
            )
            if cursor.rowcount:
                added += enqueue(db, [message], now)
    return added
