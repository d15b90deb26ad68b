"""The database: writable by the service user, in WAL mode, of a schema this skybot reads."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from bot.config import Config, database_path
from bot.doctor.checklist import Check
from bot.doctor.service_user import COMMAND_TIMEOUT_SECONDS, ServiceUser, run_command


async def _writable_by(path: Path, user: ServiceUser) -> bool:
    if user.is_me:
        return os.access(path, os.W_OK | os.X_OK)
    status, _ = await run_command(
        [*user.prefix(), "/usr/bin/test", "-w", str(path), "-a", "-x", str(path)],
        COMMAND_TIMEOUT_SECONDS,
    )
    return status == 0


async def check_database(config: Config, user: ServiceUser) -> Check:
    """The database and its directory must be writable by the service user (WAL keeps files
    beside the db). The doctor never creates or opens it: run as root, SQLite would leave
    root-owned files (the db, or its -wal/-shm even for a read-only open) the bot cannot write.
    """
    file = database_path(config)
    directory = next((p for p in (file.parent, *file.parent.parents) if p.exists()), Path("/"))
    if not await _writable_by(directory, user):
        return Check(
            "database",
            False,
            f"{directory} is not writable by {user.name}",
            f"Create {file.parent} owned by {user.name} (e.g. systemd's "
            "StateDirectory=skybot, or `install -d -o skybot /var/lib/skybot`).",
        )
    if not file.exists():
        return Check("database", True, f"{file} does not exist yet; {user.name} can create it")
    for path in (file, *(Path(f"{file}{suffix}") for suffix in ("-wal", "-shm"))):
        if path.exists() and not await _file_writable_by(path, user):
            return Check(
                "database",
                False,
                f"{path} is not writable by {user.name}",
                f"chown {user.name} {file} {file}-wal {file}-shm (those that exist).",
            )
    return judge_database_file(file)


async def _file_writable_by(path: Path, user: ServiceUser) -> bool:
    if user.is_me:
        return os.access(path, os.W_OK)
    status, _ = await run_command(
        [*user.prefix(), "/usr/bin/test", "-w", str(path)], COMMAND_TIMEOUT_SECONDS
    )
    return status == 0


def _live_schema_version(file: Path) -> int | None:
    """The schema version a running bot sees: a change it made may still be in the -wal file,
    not yet in the header. Read through SQLite only when the -wal and -shm already exist, so a
    doctor run as root creates no file the bot could not write."""
    wal, shm = Path(f"{file}-wal"), Path(f"{file}-shm")
    if not (wal.exists() and shm.exists() and wal.stat().st_size > 0):
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"{file.as_uri()}?mode=ro", uri=True)) as db:
            return int(db.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error:
        return None


def judge_database_file(file: Path) -> Check:
    """WAL mode and the schema version, from the 100-byte header of the SQLite file format
    (sqlite.org/fileformat.html): bytes 18-19 are 2 in WAL mode, 60-63 the user_version,
    unless a live bot's -wal holds a newer one."""
    from store.db import SCHEMA_VERSION

    try:
        with file.open("rb") as db:
            header = db.read(100)
    except OSError as error:
        return Check("database", False, f"{file}: {error.strerror}", "Check the file and disk.")
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return Check(
            "database",
            False,
            f"{file} is not a SQLite database",
            "Point database.path at skybot's database, or move the file aside to start afresh.",
        )
    version = _live_schema_version(file)
    if version is None:
        version = int.from_bytes(header[60:64], "big")
    if version > SCHEMA_VERSION:
        return Check(
            "database",
            False,
            f"{file} has schema {version}, newer than this skybot's {SCHEMA_VERSION}",
            "Run the newer skybot that wrote it.",
        )
    if header[18:20] != b"\x02\x02":
        return Check(
            "database",
            False,
            f"{file} is not in WAL mode",
            "Put the database on a local filesystem (WAL does not work over NFS).",
        )
    return Check("database", True, f"{file} is writable, schema {version}/{SCHEMA_VERSION}, WAL")
