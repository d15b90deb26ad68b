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


def next_rows_version(conn: Any, full: bool) -> int:
    """Take the next rows version for a save (in its transaction). `full`: the save replaces
    every row, so no reader can catch up from before it."""
    keep = KEEP_VERSIONS
    version = _counter(conn, "rows_version") + 1
    _set_counter(conn, "rows_version", version)
    if full:
        conn.execute("DELETE FROM rows_gone")
        _set_counter(conn, "rows_log_since", version)
    else:
        conn.execute("DELETE FROM rows_gone WHERE written_in <= ?", (version - keep,))
        since = max(_counter(conn, "rows_log_since"), version - keep)
        _set_counter(conn, "rows_log_since", since)
    return version


def log_gone(conn: Any, table: Table, keys: Iterable[Any], version: int) -> None:
    conn.executemany(
        "INSERT INTO rows_gone (tbl, key, written_in) VALUES (?, ?, ?)",
        ((table, key, version) for key in keys),
    )


def rows_version(conn: Any) -> int:
    """The version of the rows as committed (0: none written since versions began)."""
    return _counter(conn, "rows_version")


def changes_since(conn: Any, table: Table, version: int) -> RowChanges | None:
    """What was deleted and written in `table` after `version`, in key order; None if the
    log no longer reaches back that far (read the whole table instead)."""
    if version < _counter(conn, "rows_log_since") or version > rows_version(conn):
        return None
    key = _KEYS[table]
    gone = [
        row[0]
        for row in conn.execute(
            "SELECT key FROM rows_gone WHERE tbl = ? AND written_in > ?", (table, version)
        )
    ]
    # INDEXED BY: knowing nothing of how few rows a poll writes, SQLite's planner read the
    # whole table in key order rather than sort them (at 100,000 jobs, 20-30 ms of a core
    # per reload, for a few thousand rows).
    written = conn.execute(
        f"SELECT {key}, record FROM {table} INDEXED BY {table}_written_in "
        f"WHERE written_in > ? ORDER BY {key}",
        (version,),
    ).fetchall()
    return RowChanges(gone, written)


def _counter(conn: Any, name: str) -> int:
    row = conn.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()
    return int(row[0]) if row else 0


def _set_counter(conn: Any, name: str, value: int) -> None:
    conn.execute(
        "INSERT INTO counters (name, value) VALUES (?, ?) "
        "ON CONFLICT(name) DO UPDATE SET value = excluded.value",
        (name, value),
    )
