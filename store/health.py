"""Whether the database is working: a storage fault is one episode, told twice.

A full disk used to give a 25-line traceback every few seconds, from whichever part of skybot
wrote next, while readiness said only that the snapshot was old. Every write goes through the
one writer thread (store/writer.py), so that is where a fault is seen: one ERROR when writes
start failing (disk full, read-only, I/O error), one line when they succeed again, and in
between a state that `/readyz` and `skybot_store_failing` show. The same state holds the
database file's identity: a database deleted or replaced under the running bot (its writes
then go to an inode nobody will ever read) is an ERROR and not ready.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

# SQLite's primary result codes that mean the storage, not the SQL, is at fault.
_STORAGE_FAULTS = {
    "SQLITE_PERM",
    "SQLITE_BUSY",
    "SQLITE_LOCKED",
    "SQLITE_READONLY",
    "SQLITE_IOERR",
    "SQLITE_CORRUPT",
    "SQLITE_FULL",
    "SQLITE_CANTOPEN",
    "SQLITE_NOTADB",
}


def fault_name(error: BaseException) -> str | None:
    """SQLite's name for a storage fault (SQLITE_FULL, SQLITE_IOERR_WRITE, …), else None."""
    if not isinstance(error, sqlite3.DatabaseError) or isinstance(
        error, sqlite3.IntegrityError | sqlite3.ProgrammingError | sqlite3.InterfaceError
    ):
        return None
    name = getattr(error, "sqlite_errorname", None) or ""
    primary = "_".join(name.split("_")[:2])
    return name if primary in _STORAGE_FAULTS else None


def is_store_fault(error: BaseException) -> bool:
    return fault_name(error) is not None


@dataclass(frozen=True)
class FileIdentity:
    device: int
    inode: int

    @classmethod
    def of(cls, path: Path) -> FileIdentity:
        stat = os.stat(path)
        return cls(stat.st_dev, stat.st_ino)


class StoreHealth:
    """The database's state as the writer saw it last. Written from the writer thread and
    the event loop, read by readiness and the metrics; each change is logged once."""

    def __init__(self, path: Path | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._identity: FileIdentity | None = None
        self.write_error: str | None = None
        self.file_error: str | None = None
        self.since: float | None = None

    @property
    def failing(self) -> bool:
        return self.write_error is not None or self.file_error is not None

    def opened(self) -> None:
        """The database was just opened: remember which file it is."""
        if self.path is not None:
            self._identity = FileIdentity.of(self.path)

    def wrote(self) -> None:
        with self._lock:
            if self.write_error is None:
                return
            log.warning(
                "the database works again after %.0f s (it was: %s)",
                self._failing_for(),
                self.write_error,
            )
            self.write_error = None
            self._settle()

    def failed(self, error: BaseException) -> None:
        name = fault_name(error)
        if name is None:
            return
        what = f"{error} ({name})"
        with self._lock:
            if self.write_error is not None:
                return
            self.write_error = what
            self.since = self.since or self._clock()
        log.error(
            "the database %s is failing: %s. Polls, DMs and commands that write wait until "
            "it works again (free space, or make it writable); this is logged once",
            self.path or "(in memory)",
            what,
        )

    def check_file(self) -> None:
        """Is the database file at its path still the one skybot has open?"""
        if self.path is None or self._identity is None:
            return
        try:
            same = FileIdentity.of(self.path) == self._identity
            problem = None if same else "was replaced by another file"

        except FileNotFoundError:
            problem = "was deleted"
        except OSError as error:
            problem = f"cannot be checked ({error.strerror})"
        with self._lock:
            if problem == self.file_error:
                return
            self.file_error = problem
            if problem is None:
                self._settle()
            else:
                self.since = self.since or self._clock()
        if problem is None:
            log.warning("the database file %s is the one skybot has open again", self.path)
        else:
            log.error(
                "the database file %s %s while skybot runs: what skybot writes no longer "
                "reaches that path. Stop skybot, put the database back (or restore a "
                "backup) and start it again",
                self.path,
                problem,
            )

    def describe(self) -> str:
        problems = [self.write_error] if self.write_error else []
        if self.file_error:
            problems.append(f"the file {self.file_error}")
        if not problems:
            return f"database {self.path or '(in memory)'} works"
        return f"database {self.path} failing for {self._failing_for():.0f} s: " + "; ".join(
            problems
        )

    def _failing_for(self) -> float:
        return 0.0 if self.since is None else max(0.0, self._clock() - self.since)

    def _settle(self) -> None:
        if not self.failing:
            self.since = None


def log_failure(logger: logging.Logger, message: str, *args: object) -> None:
    """In an `except` block: the traceback, unless the database is at fault (then the store's
    health has said so once for the whole episode, and a traceback per caller is noise)."""
    error = sys.exc_info()[1]
    if error is not None and is_store_fault(error):
        logger.debug(message + ": the database is failing: %s", *args, error)
    else:
        logger.exception(message, *args)
