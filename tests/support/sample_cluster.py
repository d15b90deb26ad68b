"""A small hand-built cluster to ask `/sky` commands of: two labs, three nodes, six jobs
(running, pending, overcap, failed) and their directories, all seen at TAKEN_AT."""

from __future__ import annotations

from typing import Any

from core.records import Job, LabCap
from core.view import ClusterView
from tests.support.factories import (
    directory_usage,
    filesystem_usage,
    job,
    make_snapshot,
    make_view,
    node,
)

TAKEN_AT = 1_000_000.0
NOW = TAKEN_AT + 12
HOUR = 3600


def cluster_jobs() -> list[Job]:
    return [
        job(101, user="alice", gpus_by_type={"a40": 2}, nodes="clippy",
            start_time=NOW - 3 * HOUR - 720, time_limit_minutes=2 * 24 * 60),
        job(102, user="bob", gpus_by_type={"rtx_6000": 2}, nodes="xaea-12", start_time=NOW - 600),
        job(103, user="bob", name="sweep", state="PENDING", reason="AssocGrpGRES",
            gpus_by_type={"a40": 2}),
        job(104, user="alice", account="overcap", partition="overcap", gpus_by_type={"a40": 3},
            start_time=NOW - 60, nodes="clippy"),
        job(106, user="carol", account="kira-lab", partition="kira-lab", state="PENDING",
            reason="Resources", gpus_by_type={"a40": 1}, start_time=NOW + 2 * HOUR + 300),
        job(107, user="alice", state="FAILED", exit_code=1, end_time=NOW - 300,
            std_out="/srv/hoffman-lab/flash9/alice/out.log"),
    ]  # fmt: skip


def cluster(jobs: list[Job] | None = None, **overrides: Any) -> ClusterView:
    fields: dict[str, Any] = {
        "jobs": tuple(cluster_jobs() if jobs is None else jobs),
        "nodes": (
            node("clippy", "a40", total=8, used=5),
            node("xaea-12", "rtx_6000", used=2),
            node("baymax", "2080_ti", state="DRAINED"),
        ),
        "caps": (LabCap("hoffman-lab", 4), LabCap("kira-lab", 8)),
        "members": {"hoffman-lab": frozenset({"alice", "bob"}), "kira-lab": frozenset({"carol"})},
        "directories": (
            directory_usage("alice", 1_300_000_000),
            directory_usage("bob", 200_000_000),
            directory_usage("dave", 900_000_000),
            directory_usage("carol", 5_000_000, root="/srv/kira-lab/share4"),
        ),
        "filesystems": (
            filesystem_usage("/srv/kira-lab/share4", 194, 20),
            filesystem_usage("/srv/hoffman-lab/flash9", 55, 51),
        ),
    }
    fields.update(overrides)
    return make_view(make_snapshot(TAKEN_AT, **fields))
