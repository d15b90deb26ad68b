"""Which channels get a lab's weekly digest, and the week's figures for it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlite_utils

from core.digest import LabWeek
from store.history import directory_growth, gpu_hours_by_user, lab_members, requeues_by_user


@dataclass(frozen=True, slots=True)
class DigestChannel:
    lab: str
    channel: str
    team_id: str
    added_by: str
    added_at: float


def add_digest_channel(db: sqlite_utils.Database, subscription: DigestChannel) -> bool:
    """Subscribe the channel; False if it already was (the first subscriber is kept)."""
    with db.atomic():
        cursor = db.execute(
            "INSERT OR IGNORE INTO digest_channels (lab, channel, team_id, added_by, added_at) "
            "VALUES (?, ?, ?, ?, ?)",
            [
                subscription.lab,
                subscription.channel,
                subscription.team_id,
                subscription.added_by,
                subscription.added_at,
            ],
        )
        return cursor.rowcount == 1


def remove_digest_channel(db: sqlite_utils.Database, lab: str, channel: str) -> bool:
    with db.atomic():
        cursor = db.execute(
            "DELETE FROM digest_channels WHERE lab = ? AND channel = ?", [lab, channel]
        )
        return cursor.rowcount == 1


def digest_channels(db: sqlite_utils.Database, lab: str | None = None) -> list[DigestChannel]:
    query = "SELECT lab, channel, team_id, added_by, added_at FROM digest_channels"
    rows = (
        db.execute(query + " WHERE lab = ? ORDER BY added_at", [lab])
        if lab is not None
        else db.execute(query + " ORDER BY lab, added_at")
    )
    return [DigestChannel(*row) for row in rows]


def lab_week(
    db: sqlite_utils.Database,
    cluster: str,
    lab: str,
    account: str,
    storage_roots: Sequence[str],
    since: float,
    until: float,
) -> LabWeek:
    """Everything the digest says about one lab's week, from the stored history."""
    cap_row = db.execute(
        "SELECT gpu_cap FROM lab_caps WHERE cluster = ? AND account = ?", [cluster, account]
    ).fetchone()
    return LabWeek(
        lab=lab,
        since=since,
        until=until,
        cap=cap_row[0] if cap_row else None,
        gpu_hours=gpu_hours_by_user(db, cluster, lab, since, until),
        requeues=requeues_by_user(db, cluster, lab_members(db, cluster, account), since, until),
        growth=directory_growth(db, cluster, storage_roots, since, until),
    )
