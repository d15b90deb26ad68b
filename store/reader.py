"""The in-memory copy of the latest snapshot that command handlers read.

Handlers never touch the database on their hot path: `current()` returns the cached view, and
`refresh()` (called by the poller after each write, or by the console before each command)
reloads it on a worker thread only when a newer snapshot was committed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path

import sqlite_utils

from core.cluster_config import ClusterConfig, LabConfig
from core.gc_pauses import exempt_from_full_collections, no_collections
from core.images import GUIDE_MIN_RELEASE
from core.snapshot import ClusterSnapshot
from core.view import ClusterView
from store.db import open_db
from store.loaded_rows import LoadedRows
from store.snapshots import load_snapshot, snapshot_version


class SnapshotCache:
    def __init__(
        self,
        path: Path | str,
        cluster: str | ClusterConfig,
        labs: tuple[LabConfig, ...],
        overcap_account: str = "overcap",
        overcap_partition: str = "overcap",
        *,
        gpu_min_release: Mapping[str, str] | None = None,
    ) -> None:
        self._path = path
        # One cache serves one cluster: a bot with several holds one for each. Given as a
        # ClusterConfig, its views know it (the buttons built from them name it, and offer
        # only what skybot does there); given by name (tools, tests), they name none.
        self.cluster = cluster.name if isinstance(cluster, ClusterConfig) else cluster
        self._cluster = cluster if isinstance(cluster, ClusterConfig) else None
        self._labs = labs
        self._overcap = (overcap_account, overcap_partition)
        # None: the container guide's table, as a ClusterView has by default.
        self._gpu_min_release = dict(
            GUIDE_MIN_RELEASE if gpu_min_release is None else gpu_min_release
        )
        self._lock = threading.Lock()
        self._rows = LoadedRows()
        self._db: sqlite_utils.Database | None = None
        self._view = self._make_view(ClusterSnapshot())

    def current(self) -> ClusterView:
        return self._view

    def refresh_blocking(self) -> ClusterView:
        with self._lock:
            if self._db is None:
                self._db = open_db(self._path, any_thread=True)
            if snapshot_version(self._db, self.cluster) != self._view.snapshot.version:
                # Loading and warming it set off collections of 40-70 ms on this thread
                # before the freeze could take the new snapshot out of their reach.
                with no_collections():
                    snapshot = load_snapshot(self._db, self.cluster, self._rows)
                    # In two steps, each before collections resume (resumed first, they
                    # would set off a young collection over all the reload made). A young
                    # collection costs what its objects refer to: the snapshot's and the
                    # view's indexes each list all 100,000 jobs. One step held the loop for
                    # 25 ms on a quiet host and 40-70 ms on a busy one; two take half each.
                    exempt_from_full_collections()
                    # Warmed here, on this thread: the loop gets a view it can answer from.
                    view = self._make_view(snapshot).warm(previous=self._view)
                    exempt_from_full_collections()
                    self._view = view
            return self._view

    def _make_view(self, snapshot: ClusterSnapshot) -> ClusterView:
        return ClusterView(
            snapshot,
            self._labs,
            *self._overcap,
            gpu_min_release=self._gpu_min_release,
            cluster=self._cluster,
        )

    async def refresh(self) -> ClusterView:
        return await asyncio.to_thread(self.refresh_blocking)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
