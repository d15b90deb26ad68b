"""Writing the GPU caps (sacctmgr's associations), the limits and the storage snapshot.

Each replaces its tables whole in one transaction and marks its source current
(store/snapshots.py), so a reader sees the previous snapshot or this one, never a mix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import sqlite_utils

from core.record_codec import encode_record
from core.records import ContainerImage, DirectoryUsage, FilesystemUsage, ImageDirectory, LabCap
from core.slurm_limits import SlurmLimits
from store.limits import encode_limits
from store.snapshots import mark_success


def save_caps(
    db: sqlite_utils.Database,
    cluster: str,
    caps: Iterable[LabCap],
    members: Mapping[str, Iterable[str]],
    at: float,
) -> None:
    """Replace the cluster's GPU caps and account memberships from its Slurm associations."""
    with db.atomic():
        db.execute("DELETE FROM lab_caps WHERE cluster = ?", [cluster])
        db.conn.executemany(
            "INSERT INTO lab_caps (cluster, account, gpu_cap) VALUES (?, ?, ?)",
            [(cluster, c.account, c.gpu_cap) for c in caps],
        )
        db.execute("DELETE FROM lab_members WHERE cluster = ?", [cluster])
        db.conn.executemany(
            "INSERT INTO lab_members (cluster, account, user) VALUES (?, ?, ?)",
            [(cluster, account, user) for account, users in members.items() for user in users],
        )
        mark_success(db, cluster, "caps", at)


def save_limits(db: sqlite_utils.Database, cluster: str, limits: SlurmLimits, at: float) -> None:
    """Replace the cluster's partitions, QOS and reservations with those just read."""
    with db.atomic():
        db.execute(
            "INSERT INTO slurm_limits (cluster, record) VALUES (?, ?) "
            "ON CONFLICT(cluster) DO UPDATE SET record = excluded.record",
            [cluster, encode_limits(limits)],
        )
        mark_success(db, cluster, "limits", at)


def save_storage(
    db: sqlite_utils.Database,
    cluster: str,
    directories: Sequence[DirectoryUsage],
    filesystems: Sequence[FilesystemUsage],
    at: float,
    image_dir: ImageDirectory | None = None,
    images: Sequence[ContainerImage] = (),
) -> None:
    """Replace `cluster`'s storage snapshot and extend its history (one row per weekly
    report): every storage row is the cluster's, so one cluster's poll never touches another's
    (a cluster without storage roots empties only its own).

    With `image_dir`, the container image list (one directory, shared) is replaced too;
    without, it is left as it was.
    """
    with db.atomic():
        if image_dir is not None:
            _replace_images(db, image_dir, images)
        db.execute("DELETE FROM directories WHERE cluster = ?", [cluster])
        db.table("directories").insert_all(_directory_row(cluster, d) for d in directories)
        db.execute("DELETE FROM filesystems WHERE cluster = ?", [cluster])
        db.table("filesystems").insert_all({"cluster": cluster, **asdict(f)} for f in filesystems)
        db.table("directory_history").insert_all(
            (
                {"cluster": cluster, "path": d.path, "updated": d.updated.isoformat(), "kib": d.kib}
                for d in directories
            ),
            ignore=True,
        )
        db.table("filesystem_history").insert_all(
            (
                {
                    "cluster": cluster,
                    "at": at,
                    "mount": f.mount,
                    "used_bytes": f.used_bytes,
                    "size_bytes": f.size_bytes,
                }
                for f in filesystems
            ),
            ignore=True,
        )
        mark_success(db, cluster, "storage", at)


def _replace_images(
    db: sqlite_utils.Database, image_dir: ImageDirectory, images: Sequence[ContainerImage]
) -> None:
    conn = db.conn
    conn.execute("DELETE FROM image_dirs")
    conn.execute(
        "INSERT INTO image_dirs (path, error) VALUES (?, ?)", [image_dir.path, image_dir.error]
    )
    conn.execute("DELETE FROM images")
    conn.executemany(
        "INSERT INTO images (name, record) VALUES (?, ?)",
        ((image.name, encode_record(image)) for image in images),
    )


def _directory_row(cluster: str, d: DirectoryUsage) -> dict[str, Any]:
    row = {"cluster": cluster, **asdict(d)}
    row["updated"] = d.updated.isoformat()
    return row
