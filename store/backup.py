"""A consistent copy of skybot's database while the bot runs: SQLite's online backup.

A copy of the files (`cp skybot.db`) taken while the bot writes can miss the -wal file or catch
a page mid-write; the backup API copies one committed state, read as a WAL reader does, so the
bot is never blocked and never has to stop.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from store.db import SCHEMA_VERSION, migrate_file
from store.outbox import RESTORE_RECHECK_UNTIL, RESTORED_BACKUP_TAKEN_AT

# Written into each backup: when its state was taken (a restore checks Slack from then on).
BACKUP_TAKEN_AT = "backup_taken_at"
# How long after a restore new DMs are checked in Slack before they go: enough for the first
# polls to decide again what the bot that ran past the backup already told.
RESTORE_RECHECK_SECONDS = 3600.0


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
            with copy:
                copy.execute(
                    "INSERT OR REPLACE INTO counters (name, value) VALUES (?, ?)",
                    [BACKUP_TAKEN_AT, time.time()],
                )
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


def restore_database(backup: Path, database: Path, now: float) -> Path | None:
    """Put `backup` in place of `database` (the bot stopped), keeping the database it replaces
    beside it; returns where that went (None: there was none).

    What the backup had queued, and what the restored bot decides again in its first hour,
    may have been sent by the bot that ran past the backup: those DMs are checked in Slack
    (by the outbox key in their metadata, from the backup's time on) before they are sent.
    """
    if not backup.is_file():
        raise BackupError(f"{backup} does not exist")
    staged = database.with_name(f".{database.name}.restoring")
    staged.unlink(missing_ok=True)
    try:
        with (
            contextlib.closing(_open_source(backup)) as source,
            contextlib.closing(sqlite3.connect(staged)) as copy,
        ):
            source.backup(copy)
            taken = copy.execute(
                "SELECT value FROM counters WHERE name = ?", [BACKUP_TAKEN_AT]
            ).fetchone()
            if taken is None:
                raise BackupError(f"{backup} is not a backup `skybot backup` made")
            version = int(copy.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise BackupError(
                    f"{backup} has schema {version}, newer than this skybot's {SCHEMA_VERSION}"
                )
        migrate_file(staged)
        with contextlib.closing(sqlite3.connect(staged)) as copy, copy:
            copy.execute("UPDATE outbox SET sending_since = ? WHERE state = 'queued'", [taken[0]])
            copy.executemany(
                "INSERT OR REPLACE INTO counters (name, value) VALUES (?, ?)",
                [
                    (RESTORED_BACKUP_TAKEN_AT, taken[0]),
                    (RESTORE_RECHECK_UNTIL, now + RESTORE_RECHECK_SECONDS),
                ],
            )
        kept: Path | None = None
        if database.exists():
            kept = database.with_name(f"{database.name}.before-restore-{int(now)}")
            database.rename(kept)
        for suffix in ("-wal", "-shm"):
            Path(f"{database}{suffix}").unlink(missing_ok=True)
        staged.rename(database)
    except sqlite3.Error as error:
        raise BackupError(f"cannot restore {backup}: {error}") from error
    except OSError as error:
        raise BackupError(
            f"cannot restore {backup}: {error.strerror} ({error.filename})"
        ) from error
    finally:
        staged.unlink(missing_ok=True)
    return kept
