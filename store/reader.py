"""The in-memory copy of the latest snapshot that command handlers read.

Handlers never touch the database on their hot path: `current()` returns the cached view, and
`refresh()` (called by the poller after each write, or by the console before each command)
reloads it on a worker thread only when a newer snapshot was committed.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import sqlite_utils

from core.snapshot import ClusterSnapshot
from core.view import ClusterView, LabInfo
from store.db import open_db
from store.snapshots import load_snapshot, snapshot_version


class SnapshotCache:
    def __init__(
        self,
        path: Path | str,
        labs: tuple[LabInfo, ...],
        overcap_account: str = "overcap",
        overcap_partition: str = "overcap",
    ) -> None:
        self._path = path
        self._labs = labs
        self._overcap = (overcap_account, overcap_partition)
        self._lock = threading.Lock()
        self._db: sqlite_utils.Database | None = None
        self._view = ClusterView(ClusterSnapshot(), labs, *self._overcap)

    def current(self) -> ClusterView:
        return self._view

    def refresh_blocking(self) -> ClusterView:
        with self._lock:
            if self._db is None:
                self._db = open_db(self._path, any_thread=True)
            if snapshot_version(self._db) != self._view.snapshot.version:
                snapshot = load_snapshot(self._db)
                self._view = ClusterView(snapshot, self._labs, *self._overcap)
            return self._view

    async def refresh(self) -> ClusterView:
        return await asyncio.to_thread(self.refresh_blocking)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
