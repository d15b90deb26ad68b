"""Storage faults under a running `skybot run` (issue 28, items 4 and 5): a full disk is one
ERROR when writes start failing and one line when they work again, with
`skybot_store_failing` and `/readyz` naming the database in between; a database deleted or
replaced under the bot is an ERROR and not ready; deleting the lock file does not let a
second instance start. Before: a 25-line traceback every poll, readiness green, silence."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.exit_codes import EXIT_ALREADY_RUNNING
from tests.support.bot_lifecycle import exit_code_after_sigterm, readiness, running, write_config
from tests.support.bot_process import VERBOSE_SKYBOT, free_port, start_bot, wait_until_listening
from tests.support.clock_steps import metric, scrape
from tests.support.cluster import wait_for
from tests.support.slack_standin import SlackStandIn
from tests.support.tmpfs import mounted_tmpfs

# Slurm's commands are missing: every poll fails at once, and records that it failed (a write).
RECOVERED = "the database works again after"
POLLING = 'bin_dir = "{}/no-slurm"\npoll_seconds = 0.2\ncaps_poll_seconds = 0.2\n'
MET_FAILING_STORE = "poll: the database is failing"


def _lines(log: Path, what: Callable[[str], bool]) -> list[str]:
    return [line for line in log.read_text(errors="replace").splitlines() if what(line)]


async def _more_polls(log: Path, count: int) -> None:
    """Until `count` more polls have met the failing store (each tried to write, and failed)."""
    seen = len(_lines(log, lambda line: MET_FAILING_STORE in line))
    await wait_for(
        lambda: len(_lines(log, lambda line: MET_FAILING_STORE in line)) >= seen + count,
        30,
        f"{count} more polls to meet the failing database",
        0.2,
    )


async def _slurm_polls_completed(port: int) -> float:
    count = metric(
        await scrape(port), "skybot_poll_duration_seconds_count", 'cluster="skynet",source="slurm"'
    )
    return count or 0.0


async def _more_completed_polls(port: int, count: int) -> None:
    """Until `count` more Slurm polls have completed (the database file is checked after each)."""
    target = await _slurm_polls_completed(port) + count

    async def completed() -> bool:
        return await _slurm_polls_completed(port) >= target

    await wait_for(completed, 30, f"{count} more Slurm polls", 0.1)


def _errors(log: Path) -> list[str]:
    return _lines(log, lambda line: " ERROR " in line)


async def _store_check(port: int) -> dict[str, object]:
    checks = (await readiness(port))["checks"]
    assert isinstance(checks, dict)
    store: dict[str, object] = checks["store"]
    return store


def _fill(directory: Path) -> Path:
    """Write a file until the file system is full; returns it."""
    filler = directory / "filler"
    with filler.open("wb") as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 65536)
            out.flush()
    return filler


async def test_a_full_disk_is_one_episode_with_metric_readiness_and_recovery(
    tmp_path: Path,
) -> None:
    port = free_port()
    log = tmp_path / "bot.log"
    with mounted_tmpfs(tmp_path / "small", "8M") as disk:
        database = disk / "skybot.db"
        config = write_config(
            tmp_path, metrics_port=port, database=database, slurm=POLLING.format(tmp_path)
        )
        async with SlackStandIn() as slack:
            with (
                log.open("wb") as out,
                running(start_bot(config, slack, VERBOSE_SKYBOT, log=out)) as bot,
            ):
                await wait_until_listening(f"http://127.0.0.1:{port}/livez", attempts=400)
                assert (await _store_check(port))["ok"] is True
                filler = _fill(disk)
                await wait_for(lambda: bool(_errors(log)), 30, "an ERROR about the full disk", 0.2)
                await _more_polls(log, 5)
                errors = _errors(log)
                text = await scrape(port)
                store = await _store_check(port)
                filler.unlink()
                await wait_for(
                    lambda: bool(_lines(log, lambda line: RECOVERED in line)),
                    30,
                    "the database to work again",
                    0.2,
                )
                # The episode's own polls may have written nothing: two more, after it.
                await _more_completed_polls(port, 2)
                text_after = await scrape(port)
                store_after = await _store_check(port)
                code, _ = await exit_code_after_sigterm(bot)
        connection = sqlite3.connect(database)
        try:
            integrity = connection.execute("PRAGMA integrity_check").fetchone()[0]
            status = connection.execute("SELECT source, error FROM source_status").fetchall()
        finally:
            connection.close()
    assert len(errors) == 1, errors
    assert (
        f"the database {database} is failing: database or disk is full (SQLITE_FULL" in (errors[0])
    )
    assert not _lines(log, lambda line: line.startswith("Traceback"))
    assert metric(text, "skybot_store_failing") == 1.0
    assert store["ok"] is False and str(database) in str(store["detail"]), store
    assert "SQLITE_FULL" in str(store["detail"])
    assert metric(text_after, "skybot_store_failing") == 0.0
    assert store_after["ok"] is True, store_after
    assert code == 0
    # The store is whole, and what polls recorded after the episode is in it.
    assert integrity == "ok"
    assert {source for source, _ in status} >= {"slurm", "caps"}


@pytest.mark.parametrize("what", ["deleted", "replaced"])
async def test_a_database_deleted_or_replaced_under_the_bot_is_an_error_and_not_ready(
    tmp_path: Path, what: str
) -> None:
    port = free_port()
    log = tmp_path / "bot.log"
    database = tmp_path / "skybot.db"
    config = write_config(tmp_path, metrics_port=port, slurm=POLLING.format(tmp_path))
    async with SlackStandIn() as slack:
        with log.open("wb") as out, running(start_bot(config, slack, log=out)) as bot:
            await wait_until_listening(f"http://127.0.0.1:{port}/livez", attempts=400)
            assert (await _store_check(port))["ok"] is True
            if what == "deleted":
                database.unlink()
            else:
                shutil.copy(database, tmp_path / "copy.db")
                os.replace(tmp_path / "copy.db", database)
            await wait_for(
                lambda: bool(_errors(log)), 15, f"an ERROR about the {what} database", 0.2
            )
            # More polls, each followed by the file's check: still one ERROR.
            await _more_completed_polls(port, 3)
            store = await _store_check(port)
            text = await scrape(port)
            code, _ = await exit_code_after_sigterm(bot)
    (error,) = _errors(log)
    assert f"the database file {database} was {what}" in error
    assert store["ok"] is False and f"the file was {what}" in str(store["detail"]), store
    assert metric(text, "skybot_store_failing") == 1.0
    assert code == 0


async def test_deleting_the_lock_file_does_not_let_a_second_instance_start(
    tmp_path: Path,
) -> None:
    database = tmp_path / "skybot.db"
    first_port = free_port()
    log = tmp_path / "second.log"
    async with SlackStandIn() as slack:
        first_config = write_config(tmp_path, metrics_port=first_port, database=database)
        with running(start_bot(first_config, slack)) as first:
            await wait_until_listening(f"http://127.0.0.1:{first_port}/livez", attempts=400)
            (tmp_path / "skybot.db.lock").unlink()
            second_config = write_config(tmp_path, metrics_port=free_port(), database=database)
            with log.open("wb") as err, running(start_bot(second_config, slack, stderr=err)) as two:
                try:
                    code = await asyncio.to_thread(two.wait, 60)
                except subprocess.TimeoutExpired:
                    pytest.fail("a second skybot run started on the same database")
            assert first.poll() is None
            first_code, _ = await exit_code_after_sigterm(first)
    assert code == EXIT_ALREADY_RUNNING
    (line,) = log.read_text().splitlines()
    assert line == (
        f"skybot: another skybot run (pid {first.pid}) already uses {database}; "
        "one instance per database"
    )
    assert first_code == 0
