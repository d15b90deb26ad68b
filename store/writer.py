"""The single writer: every database write runs on one dedicated thread.

SQLite allows one writer at a time; funnelling writes through one thread makes that explicit,
and keeps a 10,000-job snapshot insert off the event loop that answers slash commands. It is
also where a storage fault is seen first: `health` (store/health.py) turns a failing disk into
one episode rather than a traceback from every caller.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

import sqlite_utils

from store.db import open_db
from store.health import StoreHealth

P = ParamSpec("P")
T = TypeVar("T")


class StoreWriter:
    """Owns the write connection; `await writer.run(fn, …)` calls fn(db, …) on its thread."""

    def __init__(self, path: Path | str) -> None:
        in_memory = str(path) == ":memory:"
        self.health = StoreHealth(None if in_memory else Path(path).expanduser())
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="skybot-writer")
        # Created on the writer thread, so sqlite3 checks that it is only ever used there.
        self._db: sqlite_utils.Database = self._executor.submit(open_db, path).result()
        self.health.opened()
        # When the call on the writer thread began (monotonic); None while it is idle. The
        # watchdog reads it: a writer stuck in one call stops the whole bot's work.
        self.busy_since: float | None = None

    async def run(
        self,
        fn: Callable[Concatenate[sqlite_utils.Database, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: self._call(fn, *args, **kwargs))

    def _call(
        self,
        fn: Callable[Concatenate[sqlite_utils.Database, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        before = self._db.conn.total_changes
        self.busy_since = time.monotonic()
        try:
            result = fn(self._db, *args, **kwargs)
        except Exception as error:
            self.health.failed(error)
            raise
        finally:
            self.busy_since = None
        # Only a write shows the store works again: reads go on succeeding on a full disk.
        if self._db.conn.total_changes != before:
            self.health.wrote()
        return result

    def check_file(self) -> None:
        """Log (once) and report if the database file was deleted or replaced."""
        self.health.check_file()

    def close(self) -> None:
        self._executor.submit(self._db.close).result()
        self._executor.shutdown(wait=True)
