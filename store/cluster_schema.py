"""The migration that keys Slurm-derived rows by cluster (store/db.py, issue 31).

SQLite cannot change a table's primary key in place: each table whose key gains the cluster
is rebuilt (new table, rows copied with cluster '', old one dropped, new one renamed), and
its indexes made again with the cluster first. Tables keyed by their own row id only gain
the column. Kept apart from store/db.py so that the list of migrations stays readable.
"""

from __future__ import annotations


def _rebuild(table: str, columns: str, key: str, copied: str, *indexes: str) -> tuple[str, ...]:
    """Statements that rebuild `table` with a `cluster` column first and primary key
    (cluster, `key`), its rows carried over under the cluster ''."""
    return (
        f"CREATE TABLE {table}_keyed (cluster TEXT NOT NULL, {columns}, "
        f"PRIMARY KEY (cluster, {key}))",
        f"INSERT INTO {table}_keyed (cluster, {copied}) SELECT '', {copied} FROM {table}",
        f"DROP TABLE {table}",
        f"ALTER TABLE {table}_keyed RENAME TO {table}",
        *indexes,
    )


CLUSTER_KEYS: tuple[str, ...] = (
    *_rebuild(
        "source_status",
        "source TEXT NOT NULL, taken_at REAL, error TEXT, error_at REAL",
        "source",
        "source, taken_at, error, error_at",
    ),
    *_rebuild(
        "jobs",
        "job_id INTEGER NOT NULL, user TEXT NOT NULL, account TEXT NOT NULL, "
        "partition TEXT NOT NULL, state TEXT NOT NULL, record TEXT NOT NULL, "
        "written_in INTEGER NOT NULL DEFAULT 0",
        "job_id",
        "job_id, user, account, partition, state, record, written_in",
        "CREATE INDEX jobs_user ON jobs(cluster, user)",
        "CREATE INDEX jobs_written_in ON jobs(cluster, written_in)",
    ),
    *_rebuild(
        "nodes",
        "name TEXT NOT NULL, record TEXT NOT NULL, written_in INTEGER NOT NULL DEFAULT 0",
        "name",
        "name, record, written_in",
        "CREATE INDEX nodes_written_in ON nodes(cluster, written_in)",
    ),
    *_rebuild("lab_caps", "account TEXT NOT NULL, gpu_cap INTEGER", "account", "account, gpu_cap"),
    *_rebuild(
        "lab_members", "account TEXT NOT NULL, user TEXT NOT NULL", "account, user", "account, user"
    ),
    *_rebuild(
        "job_states",
        "job_id INTEGER NOT NULL, state TEXT NOT NULL, restarts INTEGER NOT NULL, "
        "seen_at REAL NOT NULL",
        "job_id",
        "job_id, state, restarts, seen_at",
        "CREATE INDEX job_states_seen_at ON job_states(cluster, seen_at)",
    ),
    *_rebuild(
        "lab_usage_history",
        "at REAL NOT NULL, lab TEXT NOT NULL, gpus_used INTEGER NOT NULL, gpu_cap INTEGER, "
        "overcap_gpus INTEGER NOT NULL",
        "at, lab",
        "at, lab, gpus_used, gpu_cap, overcap_gpus",
    ),
    *_rebuild(
        "lab_usage",
        "lab TEXT NOT NULL, account TEXT NOT NULL, overcap_account TEXT NOT NULL, "
        "record TEXT NOT NULL",
        "lab",
        "lab, account, overcap_account, record",
    ),
    *_rebuild("cap_episodes", "lab TEXT NOT NULL, since REAL NOT NULL", "lab", "lab, since"),
    *_rebuild(
        "gpu_seconds",
        "hour REAL NOT NULL, lab TEXT NOT NULL, user TEXT NOT NULL, overcap INTEGER NOT NULL, "
        "seconds REAL NOT NULL",
        "hour, lab, user, overcap",
        "hour, lab, user, overcap, seconds",
    ),
    # Row-id tables: the column, and their indexes with the cluster first. An index on the
    # cluster alone is ordered by (cluster, id): a cluster's rows past a cursor, in id order.
    "ALTER TABLE job_transitions ADD COLUMN cluster TEXT NOT NULL DEFAULT ''",
    "DROP INDEX job_transitions_job",
    "CREATE INDEX job_transitions_job ON job_transitions(cluster, job_id)",
    "CREATE INDEX job_transitions_cluster ON job_transitions(cluster)",
    "ALTER TABLE rows_gone ADD COLUMN cluster TEXT NOT NULL DEFAULT ''",
    "DROP INDEX rows_gone_written_in",
    "CREATE INDEX rows_gone_written_in ON rows_gone(cluster, written_in)",
    "ALTER TABLE gpu_watches ADD COLUMN cluster TEXT NOT NULL DEFAULT ''",
    # Which cluster a submission goes to, and whose job id it got.
    "ALTER TABLE submissions ADD COLUMN cluster TEXT NOT NULL DEFAULT ''",
    "DROP INDEX submissions_job_id",
    "CREATE INDEX submissions_job_id ON submissions(cluster, job_id)",
)


# Storage per cluster (issue 38): each cluster's storage poll replaces only its own rows, so a
# cluster without storage roots no longer blanks the others'. The paths are the bot host's, so
# two clusters naming the same root each keep a row of it. Existing rows get the cluster '' and
# are named at start-up (store/clusters.py `adopt_storage_rows`: by the roots each cluster's
# labs name, then `adopt_unnamed_rows`: the rest go to the default cluster).
STORAGE_KEYS: tuple[str, ...] = (
    *_rebuild(
        "directories",
        "path TEXT NOT NULL, root TEXT NOT NULL, owner TEXT NOT NULL, updated TEXT NOT NULL, "
        "kib INTEGER NOT NULL, human TEXT NOT NULL",
        "path",
        "path, root, owner, updated, kib, human",
    ),
    *_rebuild(
        "filesystems",
        "mount TEXT NOT NULL, size_bytes INTEGER NOT NULL, used_bytes INTEGER NOT NULL, "
        "avail_bytes INTEGER NOT NULL",
        "mount",
        "mount, size_bytes, used_bytes, avail_bytes",
    ),
    *_rebuild(
        "directory_history",
        "path TEXT NOT NULL, updated TEXT NOT NULL, kib INTEGER NOT NULL",
        "path, updated",
        "path, updated, kib",
    ),
    *_rebuild(
        "filesystem_history",
        "at REAL NOT NULL, mount TEXT NOT NULL, used_bytes INTEGER NOT NULL, "
        "size_bytes INTEGER NOT NULL",
        "at, mount",
        "at, mount, used_bytes, size_bytes",
    ),
    *_rebuild(
        "hoard_alerts",
        "path TEXT NOT NULL, updated TEXT NOT NULL, kib INTEGER NOT NULL",
        "path",
        "path, updated, kib",
    ),
    *_rebuild(
        "filesystem_alerts",
        "mount TEXT NOT NULL, level REAL NOT NULL, warnings INTEGER NOT NULL",
        "mount",
        "mount, level, warnings",
    ),
)
