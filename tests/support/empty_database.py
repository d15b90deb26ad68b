"""An empty database at the current schema, copied for each test that wants one.

Migrating from nothing runs every migration (about 25 ms, most of it the table rebuilds of
later schema versions); copying a file migrated once per session takes well under 1 ms. Tests
that are about migrating (tests/test_store.py, tests/test_cluster_keys.py, every `skybot run`
process a test starts) still start from nothing."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from store.db import open_db

_template: Path | None = None


def _migrated_once() -> Path:
    global _template
    if _template is None:
        directory = Path(tempfile.mkdtemp(prefix="skybot-empty-db-"))
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
        path = directory / "skybot.db"
        open_db(path).close()  # the last close checkpoints the WAL: the file is the database
        _template = path
    return _template


def empty_database(path: Path) -> Path:
    """`path`, created as an empty database at the current schema (as `open_db` leaves it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_migrated_once(), path)
    return path
