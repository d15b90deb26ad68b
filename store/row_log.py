"""Which job and node rows each poll wrote, so that a reader reloads only those.

At 100,000 jobs, reading every row again after each poll held the bot's interpreter for
about 200 ms (the rows' text alone is over 100 MB), while a poll changes a few percent of
them. Each save that writes or deletes rows takes the next *rows version*: the rows it
writes carry it in `written_in`, and the keys it deletes are logged in `rows_gone` with it.
A reader that holds the rows as of version v asks for what was written or deleted after v.

The log of deletions is kept for the last `KEEP_VERSIONS` versions; a reader further behind
(or from before a full replacement, which rewrites every row) reads everything again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from store.clusters import cluster_counter

# Tables whose rows are versioned, by their key column.
Table = Literal["jobs", "nodes"]
_KEYS: dict[Table, str] = {"jobs": "job_id", "nodes": "name"}

# A poll every 15 s: the bot's own reader is at most one version behind; the console's,
# which reads before each command, reads everything again after half an hour away.
KEEP_VERSIONS = 100


@dataclass(frozen=True, slots=True)
class RowChanges:
    """A table's keys deleted and (key, record) rows written after some version."""

    gone: list[Any]
    written: list[tuple[Any, str]]


def next_rows_version(conn: Any, cluster: str, full: bool) -> int:
    """Take the cluster's next rows version for a save (in its transaction). `full`: the save
    replaces every row of the cluster, so no reader can catch up from before it."""
    keep = KEEP_VERSIONS
    version = _counter(conn, "rows_version", cluster) + 1
    _set_counter(conn, "rows_version", cluster, version)
    if full:
        conn.execute("DELETE FROM rows_gone WHERE cluster = ?", (cluster,))
        _set_counter(conn, "rows_log_since", cluster, version)
    else:
        conn.execute(
            "DELETE FROM rows_gone WHERE cluster = ? AND written_in <= ?",
            (cluster, version - keep),
        )
        since = max(_counter(conn, "rows_log_since", cluster), version - keep)
        _set_counter(conn, "rows_log_since", cluster, since)
    return version


def log_gone(conn: Any, cluster: str, table: Table, keys: Iterable[Any], version: int) -> None:
    conn.executemany(
        "INSERT INTO rows_gone (cluster, tbl, key, written_in) VALUES (?, ?, ?, ?)",
        ((cluster, table, key, version) for key in keys),
    )


def rows_version(conn: Any, cluster: str) -> int:
    """The version of the cluster's rows as committed (0: none written since versions
    began)."""
    return _counter(conn, "rows_version", cluster)


def changes_since(conn: Any, cluster: str, table: Table, version: int) -> RowChanges | None:
    """What was deleted and written in the cluster's rows of `table` after `version`, in key
    order; None if the log no longer reaches back that far (read them all instead)."""
    if version < _counter(conn, "rows_log_since", cluster) or version > rows_version(conn, cluster):
        return None
    key = _KEYS[table]
    gone = [
        row[0]
        for row in conn.execute(
            "SELECT key FROM rows_gone WHERE cluster = ? AND tbl = ? AND written_in > ?",
            (cluster, table, version),
        )
    ]
    # INDEXED BY: knowing nothing of how few rows a poll writes, SQLite's planner read the
    # whole table in key order rather than sort them (at 100,000 jobs, 20-30 ms of a core
    # per reload, for a few thousand rows).
    written = conn.execute(
        f"SELECT {key}, record FROM {table} INDEXED BY {table}_written_in "
        f"WHERE cluster = ? AND written_in > ? ORDER BY {key}",
        (cluster, version),
    ).fetchall()
    return RowChanges(gone, written)


def _counter(conn: Any, name: str, cluster: str) -> int:
    row = conn.execute(
        "SELECT value FROM counters WHERE name = ?", (cluster_counter(name, cluster),)
    ).fetchone()
    return int(row[0]) if row else 0


def _set_counter(conn: Any, name: str, cluster: str, value: int) -> None:
    conn.execute(
        "INSERT INTO counters (name, value) VALUES (?, ?) "
        "ON CONFLICT(name) DO UPDATE SET value = excluded.value",
        (cluster_counter(name, cluster), value),
    )
