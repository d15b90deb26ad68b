"""Reading the pollers' snapshots back, and each source's status.

Pollers are the only writers (one way in for data: store/slurm_writes.py,
store/caps_and_storage.py); handlers and watchers only read. Each successful write bumps
`snapshot_version` (`mark_success`), so a reader can keep the decoded snapshot in memory and
reload it only when something new was committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TypeVar

import sqlite_utils

from core.lab_usage import LabUsage
from core.record_codec import (
    decode_image,
    decode_job,
    decode_node,
    decode_usage,
)
from core.records import (
    DirectoryUsage,
    FilesystemUsage,
    ImageDirectory,
    Job,
    LabCap,
)
from core.snapshot import SOURCES, ClusterSnapshot, SourceStatus
from store.clusters import cluster_counter
from store.limits import load_limits
from store.loaded_rows import LoadedRows
from store.unreadable import readable

R = TypeVar("R")

# source_status's columns as SourceStatus takes them (the cluster is the caller's).
_STATUS = "source, taken_at, error, error_at"


def record_poll_failure(
    db: sqlite_utils.Database, cluster: str, source: str, error: str, at: float
) -> None:
    """Keep the cluster's last good snapshot but note that its `source` is failing, and since
    when."""
    with db.atomic():
        db.execute(
            "INSERT INTO source_status (cluster, source, error, error_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(cluster, source) DO UPDATE SET error = excluded.error, "
            "error_at = COALESCE(source_status.error_at, excluded.error_at)",
            [cluster, source, error, at],
        )
        _bump_version(db, cluster)


def snapshot_version(db: sqlite_utils.Database, cluster: str) -> int:
    row = db.execute(
        "SELECT value FROM counters WHERE name = ?", [cluster_counter("snapshot_version", cluster)]
    ).fetchone()
    return row[0] if row else 0


def load_snapshot(
    db: sqlite_utils.Database, cluster: str, rows: LoadedRows | None = None
) -> ClusterSnapshot:
    """Read the cluster's latest committed snapshot (a consistent read, even while a poll
    writes).

    `rows`, the jobs and nodes as a reader last read them, are brought up to date with what
    polls wrote since (store/loaded_rows.py) rather than read again."""
    with db.atomic():
        version = snapshot_version(db, cluster)
        if rows is None:
            jobs = _allreadable(
                (f"job {job_id}", decode_job, record)
                for job_id, record in db.execute(
                    "SELECT job_id, record FROM jobs WHERE cluster = ? ORDER BY job_id", [cluster]
                )
            )
            nodes = _allreadable(
                (f"node {name}", decode_node, record)
                for name, record in db.execute(
                    "SELECT name, record FROM nodes WHERE cluster = ? ORDER BY name", [cluster]
                )
            )
        else:
            rows.read(db.conn, cluster)
            jobs, nodes = rows.jobs.values(), rows.nodes.values()
        cap_by_account, members = load_lab_limits(db, cluster)
        caps = tuple(LabCap(account, cap) for account, cap in cap_by_account.items())
        lab_usages = _lab_usages(db, cluster, cap_by_account, jobs, rows)
        directories, filesystems, previous_kib = _storage(db, cluster)
        status = {
            r["source"]: SourceStatus(**r)
            for r in db.query(f"SELECT {_STATUS} FROM source_status WHERE cluster = ?", [cluster])
        }
        images = tuple(decode_image(r[0]) for r in db.execute("SELECT record FROM images"))
        image_dirs = [ImageDirectory(**r) for r in db.query("SELECT * FROM image_dirs")]
        limits = load_limits(db, cluster)
    for source in SOURCES:
        status.setdefault(source, SourceStatus(source))
    return ClusterSnapshot(
        jobs=jobs,
        nodes=nodes,
        caps=caps,
        directories=directories,
        filesystems=filesystems,
        previous_kib=previous_kib,
        members=members,
        status=status,
        version=version,
        images=images,
        image_dir=image_dirs[0] if image_dirs else None,
        lab_usages=lab_usages,
        limits=limits,
    )


def _storage(
    db: sqlite_utils.Database, cluster: str
) -> tuple[tuple[DirectoryUsage, ...], tuple[FilesystemUsage, ...], dict[str, int]]:
    """The cluster's directories and filesystems as last reported, and each directory's size
    in the report before."""
    directories = tuple(
        DirectoryUsage(
            root=r["root"],
            owner=r["owner"],
            path=r["path"],
            updated=datetime.fromisoformat(r["updated"]),
            kib=r["kib"],
            human=r["human"],
        )
        for r in db.query(
            "SELECT root, owner, path, updated, kib, human FROM directories WHERE cluster = ?",
            [cluster],
        )
    )
    filesystems = tuple(
        FilesystemUsage(**r)
        for r in db.query(
            "SELECT mount, size_bytes, used_bytes, avail_bytes FROM filesystems WHERE cluster = ?",
            [cluster],
        )
    )
    previous_kib = {
        path: kib
        for path, kib in db.execute(
            "SELECT d.path, (SELECT h.kib FROM directory_history h WHERE h.cluster = d.cluster "
            "AND h.path = d.path AND h.updated < d.updated ORDER BY h.updated DESC LIMIT 1) "
            "FROM directories d WHERE d.cluster = ?",
            [cluster],
        )
        if kib is not None
    }
    return directories, filesystems, previous_kib


def _allreadable(stored: Iterable[tuple[str, Callable[[str], R], str]]) -> tuple[R, ...]:
    return tuple(
        record
        for who, decode, text in stored
        if (record := readable(who, decode, text)) is not None
    )


def _lab_usages(
    db: sqlite_utils.Database,
    cluster: str,
    caps: Mapping[str, int | None],
    jobs: Sequence[Job],
    rows: LoadedRows | None,
) -> dict[tuple[str, str, str], LabUsage]:
    """The usages the last poll counted, by (lab, account, overcap account), each with its
    account's cap as of now and its waiting jobs as held in `jobs`."""
    stored = db.execute(
        "SELECT lab, account, overcap_account, record FROM lab_usage WHERE cluster = ?", [cluster]
    ).fetchall()
    if not stored:
        return {}
    job = rows.jobs.get if rows is not None else {each.job_id: each for each in jobs}.get
    return {
        (lab, account, overcap): decode_usage(record, lab, account, caps.get(account), job)
        for lab, account, overcap, record in stored
    }


def load_source_status(db: sqlite_utils.Database, cluster: str, source: str) -> SourceStatus:
    rows = list(
        db.query(
            f"SELECT {_STATUS} FROM source_status WHERE cluster = ? AND source = ?",
            [cluster, source],
        )
    )
    return SourceStatus(**rows[0]) if rows else SourceStatus(source)


def load_lab_limits(
    db: sqlite_utils.Database, cluster: str
) -> tuple[dict[str, int | None], dict[str, frozenset[str]]]:
    """The cluster's GPU caps by account and members by account, as last read from sacctmgr."""
    caps = dict(
        db.execute("SELECT account, gpu_cap FROM lab_caps WHERE cluster = ?", [cluster]).fetchall()
    )
    members: dict[str, set[str]] = {}
    for account, user in db.execute(
        "SELECT account, user FROM lab_members WHERE cluster = ?", [cluster]
    ):
        members.setdefault(account, set()).add(user)
    return caps, {a: frozenset(u) for a, u in members.items()}


def mark_success(db: sqlite_utils.Database, cluster: str, source: str, at: float) -> None:
    db.execute(
        "INSERT INTO source_status (cluster, source, taken_at, error, error_at) "
        "VALUES (?, ?, ?, NULL, NULL) "
        "ON CONFLICT(cluster, source) DO UPDATE SET taken_at = excluded.taken_at, error = NULL, "
        "error_at = NULL",
        [cluster, source, at],
    )
    _bump_version(db, cluster)


def _bump_version(db: sqlite_utils.Database, cluster: str) -> None:
    db.execute(
        "INSERT INTO counters (name, value) VALUES (?, 1) "
        "ON CONFLICT(name) DO UPDATE SET value = value + 1",
        [cluster_counter("snapshot_version", cluster)],
    )
