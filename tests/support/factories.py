"""Small record builders for unit tests of the pure core and the store."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from core.cluster_config import ClusterConfig, LabConfig
from core.gpu_watch import Watch
from core.records import DirectoryUsage, FilesystemUsage, Job, Node
from core.snapshot import SOURCES, ClusterSnapshot, SourceStatus
from core.view import ClusterView

# The cluster a default configuration's rows are stored under (its default cluster's name,
# `notifications.cluster_name`).
CLUSTER = "skynet"


def job(job_id: int, **fields: Any) -> Job:
    defaults: dict[str, Any] = {
        "name": f"job{job_id}",
        "user": "alice",
        "account": "hoffman-lab",
        "partition": "hoffman-lab",
        "state": "RUNNING",
    }
    defaults.update(fields)
    return Job(job_id=job_id, **defaults)


def node(name: str, gpu_type: str, total: int = 4, used: int = 0, **fields: Any) -> Node:
    defaults: dict[str, Any] = {
        "state": "MIXED" if used else "IDLE",
        "partitions": ("hoffman-lab", "kira-lab", "debug", "overcap"),
    }
    defaults.update(fields)
    return Node(
        name=name,
        gpus_total={gpu_type: total},
        gpus_used={gpu_type: used} if used else {},
        **defaults,
    )


# --- Builders for command tests: storage records, source status, whole snapshots and views.

LABS = (
    LabConfig("hoffman-lab", "hoffman-lab", "hoffman-lab", ("/srv/hoffman-lab/flash9",)),
    LabConfig("kira-lab", "kira-lab", "kira-lab", ("/srv/kira-lab/share4",)),
)


def directory_usage(
    owner: str, kib: int, root: str = "/srv/hoffman-lab/flash9", **fields: Any
) -> DirectoryUsage:
    defaults: dict[str, Any] = {
        "path": f"{root}/{owner}",
        "updated": datetime(2024, 5, 6, 3, 0),
        "human": f"{kib / 1024**3:.1f}T" if kib >= 1024**3 else f"{kib / 1024**2:.1f}G",
    }
    defaults.update(fields)
    return DirectoryUsage(root=root, owner=owner, kib=kib, **defaults)


def filesystem_usage(mount: str, size_tib: float, used_tib: float) -> FilesystemUsage:
    tib = 1024**4
    size, used = int(size_tib * tib), int(used_tib * tib)
    return FilesystemUsage(mount=mount, size_bytes=size, used_bytes=used, avail_bytes=size - used)


def make_snapshot(
    taken_at: float | None = 1_000.0, errors: dict[str, str] | None = None, **fields: Any
) -> ClusterSnapshot:
    """A snapshot whose sources all last succeeded at `taken_at` (None: never), some failing."""
    errors = errors or {}
    status = {
        source: SourceStatus(
            source, taken_at, errors.get(source), taken_at if source in errors else None
        )
        for source in SOURCES
    }
    fields.setdefault("status", status)
    return ClusterSnapshot(**fields)


def make_view(
    snapshot: ClusterSnapshot,
    labs: tuple[LabConfig, ...] = LABS,
    cluster: ClusterConfig | None = None,
) -> ClusterView:
    """A view of `snapshot`; of `cluster` when given (its buttons name it), else of none."""
    return ClusterView(snapshot, labs, cluster=cluster)


def watch(watch_id: int = 1, **fields: Any) -> Watch:
    """alice's watch for two a40s in hoffman-lab, expiring at 100 s, `fields` changed."""
    values: dict[str, Any] = {
        "team_id": "T1",
        "user_id": "U1",
        "cluster_user": "alice",
        "gpu_type": "a40",
        "count": 2,
        "overcap": False,
        "lab": "hoffman-lab",
        "partition": "hoffman-lab",
        "account": "hoffman-lab",
        "created_at": 0.0,
        "expires_at": 100.0,
    }
    values.update(fields)
    return Watch(watch_id, **values)
