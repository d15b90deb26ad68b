"""Start-up refusals (issue 28, items 3 and 6): a database newer than the code, a database
directory skybot cannot write, a bad config. Each is one line on stderr, at journald
priority err when stderr is the journal, and an exit code the unit's
RestartPreventExitStatus= lists, so systemd does not retry what a retry cannot fix. They used
to be a 40-line traceback, exit 1 (retried forever), at priority info."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bot import __version__
from bot.exit_codes import EXIT_CONFIG, EXIT_DATABASE_UNUSABLE, EXIT_SCHEMA_TOO_NEW
from store.db import SCHEMA_VERSION
from tests.support.bot_lifecycle import running, write_config
from tests.support.bot_process import free_port, start_bot
from tests.support.slack_standin import SlackStandIn
from tests.support.tmpfs import mounted_tmpfs


async def _refused(config: Path, stderr: Path, journal: bool) -> int:
    """Run `skybot run`, its stderr to a file (the journal's stand-in with `journal`: systemd
    names the stream in JOURNAL_STREAM); its exit code."""
    with stderr.open("wb") as err:
        stat = os.fstat(err.fileno())
        env = {"JOURNAL_STREAM": f"{stat.st_dev}:{stat.st_ino}"} if journal else {}
        async with SlackStandIn() as slack:
            with running(start_bot(config, slack, stderr=err, extra_env=env)) as bot:
                try:
                    return await asyncio.to_thread(bot.wait, 60)
                except subprocess.TimeoutExpired:
                    pytest.fail("skybot run kept running instead of refusing to start")


def _one_line(stderr: Path, journal: bool) -> str:
    (line,) = stderr.read_text().splitlines()
    prefix = "<3>skybot: " if journal else "skybot: "
    assert line.startswith(prefix), line
    return line.removeprefix(prefix)


@pytest.mark.parametrize("journal", [False, True])
async def test_a_database_newer_than_the_code_is_one_line_and_exit_4(
    tmp_path: Path, journal: bool
) -> None:
    database = tmp_path / "skybot.db"
    with sqlite3.connect(database) as connection:
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 3}")
    stderr = tmp_path / "stderr"
    code = await _refused(write_config(tmp_path, metrics_port=free_port()), stderr, journal)
    assert code == EXIT_SCHEMA_TOO_NEW
    line = _one_line(stderr, journal)
    assert line == (
        f"the database {database} has schema version {SCHEMA_VERSION + 3}, newer than skybot "
        f"{__version__} knows ({SCHEMA_VERSION}): a newer skybot wrote it. Install that newer "
        "skybot again, or restore a backup of the database taken before it ran"
    )


@pytest.mark.parametrize("journal", [False, True])
async def test_an_unwritable_database_directory_is_one_line_and_exit_5(
    tmp_path: Path, journal: bool
) -> None:
    # Root may write anywhere its permissions are concerned: a read-only mount stops it.
    with mounted_tmpfs(tmp_path / "readonly", "1M", "ro") as readonly:
        database = readonly / "state" / "skybot.db"
        config = write_config(tmp_path, metrics_port=free_port(), database=database)
        stderr = tmp_path / "stderr"
        code = await _refused(config, stderr, journal)
    assert code == EXIT_DATABASE_UNUSABLE
    line = _one_line(stderr, journal)
    assert line.startswith(f"cannot use the database directory {readonly / 'state'}: ")
    assert "read-only file system" in line
    assert "skybot runs as root, which must be able to write the database" in line


async def test_a_database_file_skybot_cannot_open_is_one_line_and_exit_5(tmp_path: Path) -> None:
    database = tmp_path / "skybot.db"
    database.mkdir()  # a directory where the database should be
    stderr = tmp_path / "stderr"
    config = write_config(tmp_path, metrics_port=free_port(), database=database)
    code = await _refused(config, stderr, journal=True)
    assert code == EXIT_DATABASE_UNUSABLE
    assert _one_line(stderr, journal=True).startswith(f"cannot use the database {database}: ")


@pytest.mark.parametrize("journal", [False, True])
async def test_a_bad_config_is_one_line_and_exit_2(tmp_path: Path, journal: bool) -> None:
    config = tmp_path / "skybot.toml"
    config.write_text("[slurm]\npoll_seconds = -5\n")
    stderr = tmp_path / "stderr"
    code = await _refused(config, stderr, journal)
    assert code == EXIT_CONFIG
    assert _one_line(stderr, journal).startswith("config error: ")


def test_a_crash_at_start_is_logged_at_crit_with_its_traceback_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Not a refusal: a bug. It goes through logging, so journald gets it at priority crit
    (bot/logs.py prefixes every line of it), not as a bare traceback at info."""
    import bot.service
    from bot.cli import main

    async def crash(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(bot.service, "run_claimed", crash)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-test")
    config = write_config(tmp_path, metrics_port=free_port())
    assert main(["run", "--config", str(config)]) == 1
    (record,) = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert record.getMessage() == "skybot stopped: boom"
    assert record.exc_info is not None


def test_a_refusal_comes_before_the_slack_http_and_scheduler_libraries_load(
    tmp_path: Path,
) -> None:
    """They are two thirds of a start's second of CPU: an admin's refused `skybot run` (and
    systemd's retry of one) answers without paying for them."""
    database = tmp_path / "skybot.db"
    with sqlite3.connect(database) as connection:
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    config = write_config(tmp_path, metrics_port=free_port())
    probe = (
        "import sys\n"
        "from bot.cli import main\n"
        f"code = main(['run', '--config', {str(config)!r}])\n"
        "heavy = ('aiohttp', 'slack_bolt', 'slack_sdk', 'apscheduler', 'handlers', 'scheduler')\n"
        "print(code, sorted(name for name in heavy if name in sys.modules))\n"
    )
    env = {**os.environ, "SLACK_BOT_TOKEN": "xoxb-test", "SLACK_APP_TOKEN": "xapp-test"}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parent.parent,
        timeout=60,
    )
    assert done.stdout.split("\n")[0] == f"{EXIT_SCHEMA_TOO_NEW} []", done.stdout + done.stderr
