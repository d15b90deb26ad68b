"""A running bot's database read from outside, read-only: when a cluster's last poll of a source was
stored, its error, and waiting for a newer one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlite_utils

from store.snapshots import load_source_status
from tests.support.cluster import wait_for
from tests.support.private_jobs import private_dir  # noqa: F401 (a fixture)


def source_status(database: Path, cluster: str) -> tuple[float | None, str | None]:
    """When `cluster`'s last Slurm poll was stored, and its error if the last one failed."""
    try:
        connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        try:
            status = load_source_status(sqlite_utils.Database(connection), cluster, "slurm")
            return status.taken_at, status.error
        finally:
            connection.close()
    except sqlite3.OperationalError:
        return None, None


async def stored_poll(database: Path, cluster: str, after: float) -> float:
    def newer() -> float | None:
        taken_at, _ = source_status(database, cluster)
        return taken_at if taken_at is not None and taken_at > after else None

    return await wait_for(newer, 60, f"a {cluster} poll", interval=0.2)


def source_error(database: Path, source: str) -> str | None:
    """The error stored for the last poll of `source` by a one-cluster bot, or None."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        row = db.execute("SELECT error FROM source_status WHERE source = ?", [source]).fetchone()
    return row[0] if row else None
