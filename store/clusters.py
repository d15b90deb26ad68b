"""Naming the rows a single-cluster skybot wrote, and the per-cluster counters.

The migration that keys rows by cluster (store/cluster_schema.py) cannot know what the
configuration calls today's cluster, so it carries every existing row over under the cluster
''. `adopt_unnamed_rows` gives them the default cluster's name at start-up, before any
poller, watcher or reader runs. It is idempotent: once no row is unnamed it changes nothing,
so every start may call it, and a kill -9 during it leaves all or none (one transaction).
"""

from __future__ import annotations

import sqlite_utils

# Every table with a `cluster` column.
CLUSTER_TABLES = (
    "source_status",
    "jobs",
    "nodes",
    "lab_caps",
    "lab_members",
    "job_states",
    "job_transitions",
    "lab_usage_history",
    "lab_usage",
    "cap_episodes",
    "gpu_seconds",
    "rows_gone",
    "gpu_watches",
    "submissions",
)

# Counters (table `counters`) and notification cursors (`notify_cursors`) kept per cluster,
# under `cluster_counter(name, cluster)`; before issue 31 they had the bare name.
CLUSTER_COUNTERS = ("history_start", "rows_version", "rows_log_since", "snapshot_version")
CLUSTER_CURSORS = ("job_transitions",)


def cluster_counter(name: str, cluster: str) -> str:
    """The name under which `cluster`'s counter or cursor `name` is kept."""
    return f"{name}@{cluster}"


def adopt_unnamed_rows(db: sqlite_utils.Database, cluster: str) -> int:
    """Name every unnamed row (cluster '') and bare counter after `cluster`; how many rows
    were named. A row whose key the cluster already holds (written under its name after the
    upgrade, so newer) wins over the unnamed one, which is dropped."""
    if not cluster:
        raise ValueError("a cluster's name cannot be empty")
    named = 0
    with db.atomic():
        for table in CLUSTER_TABLES:
            named += db.execute(
                f"UPDATE OR IGNORE {table} SET cluster = ? WHERE cluster = ''", [cluster]
            ).rowcount
            db.execute(f"DELETE FROM {table} WHERE cluster = ''")
        for table, names in (("counters", CLUSTER_COUNTERS), ("notify_cursors", CLUSTER_CURSORS)):
            for name in names:
                db.execute(
                    f"INSERT OR IGNORE INTO {table} (name, value) "
                    f"SELECT ?, value FROM {table} WHERE name = ?",
                    [cluster_counter(name, cluster), name],
                )
                db.execute(f"DELETE FROM {table} WHERE name = ?", [name])
    return named
