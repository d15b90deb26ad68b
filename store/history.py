"""Usage history for growth figures and charts, kept for a limited number of days."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlite_utils

from core.chart_specs import SizeSample, UsageSample
from core.gpu_hours import credit_poll
from core.lab_usage import LabUsage
from core.transitions import REQUEUED

DAY = 86400.0


def save_lab_usage(
    db: sqlite_utils.Database,
    cluster: str,
    usages: Sequence[LabUsage],
    at: float,
    keep_days: int,
    max_interval: float = 60.0,
) -> None:
    """Append one sample per lab of the cluster, credit the GPU-seconds since its previous
    sample (at most `max_interval`), and drop the cluster's samples older than the retention
    limit."""
    with db.atomic():
        previous_at = db.execute(
            "SELECT MAX(at) FROM lab_usage_history WHERE cluster = ?", [cluster]
        ).fetchone()[0]
        db.conn.executemany(
            "INSERT INTO gpu_seconds (cluster, hour, lab, user, overcap, seconds) "
            "VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(cluster, hour, lab, user, overcap) DO UPDATE SET "
            "seconds = seconds + excluded.seconds",
            (
                (cluster, c.hour, c.lab, c.user, int(c.overcap), c.seconds)
                for c in credit_poll(usages, at, previous_at, max_interval)
            ),
        )
        db.table("lab_usage_history").insert_all(
            (
                {
                    "cluster": cluster,
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
        prune_history(db, cluster, at - keep_days * DAY)


def prune_history(db: sqlite_utils.Database, cluster: str, before: float) -> None:
    """Drop the cluster's history older than `before`."""
    db.execute("DELETE FROM lab_usage_history WHERE cluster = ? AND at < ?", [cluster, before])
    db.execute("DELETE FROM filesystem_history WHERE cluster = ? AND at < ?", [cluster, before])
    db.execute("DELETE FROM job_transitions WHERE cluster = ? AND at < ?", [cluster, before])
    # A job squeue still lists is still seen: polls write only records that changed, so a
    # job pending unchanged for weeks keeps an old seen_at.
    db.execute(
        "DELETE FROM job_states WHERE cluster = ? AND seen_at < ? "
        "AND job_id NOT IN (SELECT job_id FROM jobs WHERE cluster = ?)",
        [cluster, before, cluster],
    )
    db.execute("DELETE FROM gpu_seconds WHERE cluster = ? AND hour < ?", [cluster, before])


def lab_usage_series(
    db: sqlite_utils.Database, cluster: str, lab: str, since: float
) -> list[tuple[float, int, int | None]]:
    """(time, GPUs used, cap) samples for one lab of the cluster, oldest first."""
    return [
        (r[0], r[1], r[2])
        for r in db.execute(
            "SELECT at, gpus_used, gpu_cap FROM lab_usage_history WHERE cluster = ? AND lab = ? "
            "AND at >= ? ORDER BY at",
            [cluster, lab, since],
        )
    ]


def directory_kib_before(
    db: sqlite_utils.Database, cluster: str, path: str, updated_before: str
) -> int | None:
    """The directory's size in the cluster's last weekly report before `updated_before` (ISO
    time)."""
    row = db.execute(
        "SELECT kib FROM directory_history WHERE cluster = ? AND path = ? AND updated < ? "
        "ORDER BY updated DESC LIMIT 1",
        [cluster, path, updated_before],
    ).fetchone()
    return row[0] if row else None


def lab_usage_samples(
    db: sqlite_utils.Database, cluster: str, lab: str, since: float, until: float
) -> list[UsageSample]:
    """Every poll's sample of one lab of the cluster in [since, until], oldest first (for the
    GPU chart)."""
    return [
        UsageSample(r[0], r[1], r[2], r[3])
        for r in db.execute(
            "SELECT at, gpus_used, gpu_cap, overcap_gpus FROM lab_usage_history "
            "WHERE cluster = ? AND lab = ? AND at >= ? AND at <= ? ORDER BY at",
            [cluster, lab, since, until],
        )
    ]


def directory_size_series(
    db: sqlite_utils.Database,
    cluster: str,
    roots: Sequence[str],
    since: float,
    until: float,
    limit: int,
) -> dict[str, list[SizeSample]]:
    """The `limit` directories of the cluster under `roots` that were largest in their newest
    report, each with every weekly size reported in [since, until], largest first (for the
    disk chart)."""
    reports: dict[str, list[SizeSample]] = {}
    for root in roots:
        prefix = root.rstrip("/") + "/"
        for path, updated, kib in db.execute(
            "SELECT path, updated, kib FROM directory_history "
            "WHERE cluster = ? AND substr(path, 1, ?) = ? ORDER BY updated",
            [cluster, len(prefix), prefix],
        ):
            at = _report_time(updated)
            if since <= at <= until:
                reports.setdefault(path, []).append(SizeSample(at, kib))
    largest = sorted(reports, key=lambda path: reports[path][-1].kib, reverse=True)[:limit]
    several_roots = len(roots) > 1
    return {_directory_label(path, several_roots): reports[path] for path in largest}


def gpu_hours_by_user(
    db: sqlite_utils.Database, cluster: str, lab: str, since: float, until: float
) -> dict[tuple[str, bool], float]:
    """(user, on overcap) -> GPU-hours that lab member ran in the hours starting in the window."""
    return {
        (user, bool(overcap)): seconds / 3600.0
        for user, overcap, seconds in db.execute(
            "SELECT user, overcap, SUM(seconds) FROM gpu_seconds "
            "WHERE cluster = ? AND lab = ? AND hour >= ? AND hour < ? GROUP BY user, overcap",
            [cluster, lab, since, until],
        )
    }


def requeues_by_user(
    db: sqlite_utils.Database, cluster: str, users: Sequence[str], since: float, until: float
) -> dict[str, int]:
    """How many times each of `users` had a job requeued (preempted, mostly) in the window."""
    if not users:
        return {}
    marks = ", ".join("?" for _ in users)
    return {
        user: count
        for user, count in db.execute(
            f"SELECT user, COUNT(*) FROM job_transitions WHERE cluster = ? AND to_state = ? "
            f"AND at >= ? AND at < ? AND user IN ({marks}) GROUP BY user",
            [cluster, REQUEUED, since, until, *users],
        )
    }


def directory_growth(
    db: sqlite_utils.Database, cluster: str, roots: Sequence[str], since: float, until: float
) -> dict[str, tuple[int, int]]:
    """The cluster's path -> (KiB in the last report at or before `since`, KiB in the newest
    by `until`), for directories under `roots` reported in the window. A directory first
    reported inside the window starts from its first report."""
    growth: dict[str, tuple[int, int]] = {}
    for root in roots:
        prefix = root.rstrip("/") + "/"
        rows: dict[str, list[tuple[float, int]]] = {}
        for path, updated, kib in db.execute(
            "SELECT path, updated, kib FROM directory_history "
            "WHERE cluster = ? AND substr(path, 1, ?) = ? ORDER BY updated",
            [cluster, len(prefix), prefix],
        ):
            rows.setdefault(path, []).append((_report_time(updated), kib))
        for path, reports in rows.items():
            before = [kib for at, kib in reports if at <= since]
            within = [kib for at, kib in reports if since < at <= until]
            if within:
                growth[path] = (before[-1] if before else within[0], within[-1])
    return growth


def lab_members(db: sqlite_utils.Database, cluster: str, account: str) -> list[str]:
    return [
        r[0]
        for r in db.execute(
            "SELECT user FROM lab_members WHERE cluster = ? AND account = ?", [cluster, account]
        )
    ]


def _report_time(updated: str) -> float:
    # Reports carry the fileserver's local time without a zone, as the cron job wrote it.
    return datetime.fromisoformat(updated).timestamp()


def _directory_label(path: str, with_root: bool) -> str:
    parent, _, name = path.rstrip("/").rpartition("/")
    return f"{name} ({parent.rpartition('/')[2]})" if with_root else name
