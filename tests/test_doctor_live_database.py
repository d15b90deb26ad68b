"""The doctor reads the schema a running bot sees: with WAL, a fresh migration can sit in the
-wal file while the database file's header still says 0 (it printed "schema 0/12")."""

from __future__ import annotations

from pathlib import Path

from bot.doctor.database import judge_database_file
from store.db import SCHEMA_VERSION
from store.writer import StoreWriter


def header_version(file: Path) -> int:
    return int.from_bytes(file.read_bytes()[60:64], "big")


def test_a_live_wal_database_shows_its_migrated_schema(tmp_path: Path) -> None:
    file = tmp_path / "skybot.db"
    # Migrated from nothing (not the conftest's copied empty database): the migration's
    # last versions are still in the WAL while the writer holds the file open.
    writer = StoreWriter(file)
    try:
        assert header_version(file) < SCHEMA_VERSION, "the migration was checkpointed: no WAL"
        check = judge_database_file(file)
        assert check.ok, check
        assert check.detail == f"{file} is writable, schema {SCHEMA_VERSION}/{SCHEMA_VERSION}, WAL"
        files = {p.name for p in tmp_path.iterdir()}
        assert files == {"skybot.db", "skybot.db-wal", "skybot.db-shm"}
    finally:
        writer.close()


def test_a_closed_database_is_read_from_its_header(tmp_path: Path) -> None:
    StoreWriter(tmp_path / "skybot.db").close()  # closing checkpoints the WAL into the file
    check = judge_database_file(tmp_path / "skybot.db")
    assert check.ok and f"schema {SCHEMA_VERSION}/{SCHEMA_VERSION}" in check.detail
