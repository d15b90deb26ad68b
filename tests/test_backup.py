"""`skybot backup PATH`: a consistent copy of the database while the bot keeps writing."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

from store.db import SCHEMA_VERSION, open_db

REPO = Path(__file__).resolve().parent.parent


def skybot(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args, "--config", str(config)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_a_backup_taken_during_writes_is_one_committed_state(tmp_path: Path) -> None:
    database = tmp_path / "skybot.db"
    config = tmp_path / "skybot.toml"
    config.write_text(f'[database]\npath = "{database}"\n')
    db = open_db(database, any_thread=True)
    written = [0]
    stop = threading.Event()

    def keep_writing() -> None:  # as the bot does: one commit after another
        while not stop.is_set():
            with db.conn:
                db.execute(
                    "INSERT OR REPLACE INTO counters (name, value) VALUES ('a', ?), ('b', ?)",
                    [written[0] + 1, written[0] + 1],
                )
            written[0] += 1

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        result = skybot("backup", str(tmp_path / "copy.db"), config=config)
    finally:
        stop.set()
        writer.join()
        db.close()
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"backed up schema {SCHEMA_VERSION} to {tmp_path}/copy.db (")
    copy = sqlite3.connect(tmp_path / "copy.db")
    assert copy.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    assert copy.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    a, b = (v for (v,) in copy.execute("SELECT value FROM counters WHERE name IN ('a', 'b')"))
    assert a == b and 0 < a <= written[0], "the copy holds one commit, never half of one"
    assert not (tmp_path / ".copy.db.partial").exists()


def test_a_backup_never_overwrites_and_says_why_in_one_line(tmp_path: Path) -> None:
    database = tmp_path / "skybot.db"
    config = tmp_path / "skybot.toml"
    config.write_text(f'[database]\npath = "{database}"\n')
    missing = skybot("backup", str(tmp_path / "copy.db"), config=config)
    assert (missing.returncode, missing.stderr) == (
        1, f"skybot backup: {database} does not exist: nothing to back up\n",
    )  # fmt: skip
    open_db(database).close()
    (tmp_path / "copy.db").write_text("an older backup")
    taken = skybot("backup", str(tmp_path / "copy.db"), config=config)
    assert taken.returncode == 1
    assert taken.stderr == (
        f"skybot backup: {tmp_path}/copy.db exists: give a new file name (a backup never "
        "overwrites)\n"
    )
    assert (tmp_path / "copy.db").read_text() == "an older backup"
