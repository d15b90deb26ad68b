"""Usage history for growth figures and charts, kept for a limited number of days."""

from __future__ import annotations

from collections.abc import Sequence

import sqlite_utils

from core.lab_usage import LabUsage

DAY = 86400.0


def save_lab_usage(
    db: sqlite_utils.Database, usages: Sequence[LabUsage], at: float, keep_days: int
) -> None:
    """Append one sample per lab and drop samples older than the retention limit."""
    with db.atomic():
        db["lab_usage_history"].insert_all(
            (
                {
                    "at": at,
                    "lab": u.lab,
                    "gpus_used": u.gpus_used,
                    "gpu_cap": u.cap,
                    "overcap_gpus": u.overcap_gpus,
                }
                for u in usages
            ),
            ignore=True,
        )
        prune_history(db, at - keep_days * DAY)


def prune_history(db: sqlite_utils.Database, before: float) -> None:
    db.execute("DELETE FROM lab_usage_history WHERE at < ?", [before])
    db.execute("DELETE FROM filesystem_history WHERE at < ?", [before])
    db.execute("DELETE FROM job_transitions WHERE at < ?", [before])
    db.execute("DELETE FROM job_states WHERE seen_at < ?", [before])


def lab_usage_series(
    db: sqlite_utils.Database, lab: str, since: float
) -> list[tuple[float, int, int | None]]:
    """(time, GPUs used, cap) samples for one lab, oldest first."""
    return [
        (r[0], r[1], r[2])
        for r in db.execute(
            "SELECT at, gpus_used, gpu_cap FROM lab_usage_history WHERE lab = ? AND at >= ? "
            "ORDER BY at",
            [lab, since],
        )
    ]


def directory_kib_before(db: sqlite_utils.Database, path: str, updated_before: str) -> int | None:
    """The directory's size in the last weekly report before `updated_before` (ISO time)."""
    row = db.execute(
        "SELECT kib FROM directory_history WHERE path = ? AND updated < ? "
        "ORDER BY updated DESC LIMIT 1",
        [path, updated_before],
    ).fetchone()
    return row[0] if row else None
