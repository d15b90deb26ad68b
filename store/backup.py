"""A consistent copy of skybot's database while the bot runs: SQLite's online backup.

A copy of the files (`cp skybot.db`) taken while the bot writes can miss the -wal file or catch
a page mid-write; the backup API copies one committed state, read as a WAL reader does, so the
bot is never blocked and never has to stop.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path


class BackupError(RuntimeError):
    """The backup was not made; the message says why and what to do."""


@dataclass(frozen=True)
class BackupResult:
    path: Path
    size_bytes: int
    schema_version: int


def backup_database(source: Path, destination: Path) -> BackupResult:
    """Copy the committed state of `source` to `destination`, a new file, atomically: a
    temporary file beside it is renamed only once the copy is complete and checked."""
    if not source.is_file():
        raise BackupError(f"{source} does not exist: nothing to back up")
    if destination.exists():
        raise BackupError(f"{destination} exists: give a new file name (a backup never overwrites)")
    if not destination.parent.is_dir():
        raise BackupError(f"{destination.parent} is not a directory")
    partial = destination.with_name(f".{destination.name}.partial")
    try:
        with (
            contextlib.closing(_open_source(source)) as db,
            contextlib.closing(sqlite3.connect(partial)) as copy,
        ):
            db.backup(copy)
            problem = copy.execute("PRAGMA quick_check").fetchone()[0]
            version = int(copy.execute("PRAGMA user_version").fetchone()[0])
            # One file that opens anywhere: no -wal beside it to lose in a move.
            copy.execute("PRAGMA journal_mode = DELETE")
        if problem != "ok":
            raise BackupError(f"the copy failed SQLite's check ({problem}); nothing was kept")
        with partial.open("rb") as written:
            os.fsync(written.fileno())
        partial.rename(destination)
    except sqlite3.Error as error:
        raise BackupError(f"cannot back up {source}: {error}") from error
    except OSError as error:
        raise BackupError(f"cannot write {destination}: {error.strerror}") from error
    finally:
        partial.unlink(missing_ok=True)
    return BackupResult(destination, destination.stat().st_size, version)


def _open_source(source: Path) -> sqlite3.Connection:
    """Read-only, so the backup never writes to the bot's database; a running bot's -wal and
    -shm already exist, and a stopped bot's database is whole in its one file."""
    db = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
    db.execute("PRAGMA busy_timeout = 5000")
    return db
