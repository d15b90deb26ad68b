"""Naming the rows a single-cluster skybot wrote, and the per-cluster counters.

The migration that keys rows by cluster (store/cluster_schema.py) cannot know what the
configuration calls today's cluster, so it carries every existing row over under the cluster
''. `adopt_unnamed_rows` gives them the default cluster's name at start-up, before any
poller, watcher or reader runs. It is idempotent: once no row is unnamed it changes nothing,
so every start may call it, and a kill -9 during it leaves all or none (one transaction).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
    "directories",
    "filesystems",
    "directory_history",
    "filesystem_history",
    "hoard_alerts",
    "filesystem_alerts",
)

# The storage tables, and the column each says where its row is: a root, a mount or a path
# under one (`adopt_storage_rows`).
_STORAGE_PLACES = (
    ("directories", "root"),
    ("filesystems", "mount"),
    ("directory_history", "path"),
    ("filesystem_history", "mount"),
    ("hoard_alerts", "path"),
    ("filesystem_alerts", "mount"),
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


def adopt_storage_rows(db: sqlite_utils.Database, roots: Mapping[str, Sequence[str]]) -> int:
    """Name each unnamed storage row (from before storage was kept per cluster) after every
    cluster whose labs' storage roots it lies on (`roots`: cluster -> roots), a row on a root
    two clusters share going to both; how many rows were named. What lies on no configured
    root is left for `adopt_unnamed_rows` (the default cluster's). Idempotent, like it."""
    named = 0
    with db.atomic():
        for table, place in _STORAGE_PLACES:
            columns = [c.name for c in db.table(table).columns if c.name != "cluster"]
            listed = ", ".join(columns)
            for cluster, cluster_roots in roots.items():
                for root in cluster_roots:
                    prefix = root.rstrip("/") + "/"
                    named += db.execute(
                        f"INSERT OR IGNORE INTO {table} (cluster, {listed}) "
                        f"SELECT ?, {listed} FROM {table} WHERE cluster = '' "
                        f"AND ({place} = ? OR substr({place}, 1, ?) = ?)",
                        [cluster, root, len(prefix), prefix],
                    ).rowcount
            for cluster_roots in roots.values():
                for root in cluster_roots:
                    prefix = root.rstrip("/") + "/"
                    db.execute(
                        f"DELETE FROM {table} WHERE cluster = '' "
                        f"AND ({place} = ? OR substr({place}, 1, ?) = ?)",
                        [root, len(prefix), prefix],
                    )
    return named
