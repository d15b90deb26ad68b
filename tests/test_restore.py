"""`skybot restore BACKUP` sends no DM twice (issue 28): the bot that ran past the backup sent
what the backup still has queued, and notices it decided after the backup; the restored bot
queues the first again and decides the second again. Both are looked for in Slack (by the
outbox key in their metadata) before they go; a notice nobody sent goes once.

The real `skybot run` and `skybot backup`/`restore` processes against the Slack stand-in.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store.db import open_db
from store.outbox import OutboxMessage, enqueue
from tests.support.bot_process import start_bot
from tests.support.cluster import wait_for
from tests.support.slack_standin import SlackStandIn, SlackUser

REPO = Path(__file__).resolve().parent.parent
ALICE = "UALICE"
QUEUED_AT_BACKUP = [OutboxMessage(f"job:{n}:end", ALICE, f"Job {n} completed.") for n in (1, 2)]
DECIDED_AFTER_BACKUP = OutboxMessage("job:3:end", ALICE, "Job 3 completed.")
NEW_AFTER_RESTORE = OutboxMessage("job:4:end", ALICE, "Job 4 failed.")


def skybot(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args, "--config", str(config)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def add(database: Path, *messages: OutboxMessage) -> None:
    db = open_db(database)
    try:
        enqueue(db, messages, time.time())
    finally:
        db.close()


def sent_keys(database: Path) -> set[str]:
    db = open_db(database)
    try:
        return {key for (key,) in db.execute("SELECT key FROM outbox WHERE state = 'sent'")}
    finally:
        db.close()


async def run_bot_until_sent(
    config: Path, database: Path, slack: SlackStandIn, keys: set[str], log: Path
) -> None:
    with log.open("ab") as output:
        bot = start_bot(config, slack, log=output)
        try:
            await wait_for(lambda: keys <= sent_keys(database), 60, f"{sorted(keys)} sent", 0.1)
        finally:
            bot.terminate()
            await asyncio.to_thread(bot.wait, 30)


@pytest.mark.timeout(180)
async def test_a_restored_backup_sends_no_dm_twice(tmp_path: Path) -> None:
    database = tmp_path / "skybot.db"
    config = tmp_path / "skybot.toml"
    # Polls rarely: this test is about the outbox, not Slurm; nor about pacing, so DMs to one
    # user go faster than Slack's one a second.
    config.write_text(
        f'[slack]\nmode = "socket"\n[slurm]\npoll_seconds = 600\n[database]\npath = "{database}"\n'
        "[notifications]\nmessages_per_second_per_channel = 20\n"
    )
    log = tmp_path / "bot.log"
    add(database, *QUEUED_AT_BACKUP)
    backup = skybot("backup", str(tmp_path / "backup.db"), config=config)
    assert backup.returncode == 0, backup.stderr

    async with SlackStandIn(users=[SlackUser(ALICE, "alice")]) as slack:
        # The bot runs on past the backup: it sends what was queued and decides job 3's end.
        add(database, DECIDED_AFTER_BACKUP)
        everything = {m.key for m in [*QUEUED_AT_BACKUP, DECIDED_AFTER_BACKUP]}
        await run_bot_until_sent(config, database, slack, everything, log)

        restore = skybot("restore", str(tmp_path / "backup.db"), config=config)
        assert restore.returncode == 0, restore.stderr
        assert restore.stdout.startswith(f"restored {tmp_path}/backup.db into {database}; ")
        assert sent_keys(database) == set(), "the backup's messages were all queued"
        # The restored bot decides job 3's end again, and job 4's for the first time.
        add(database, DECIDED_AFTER_BACKUP, NEW_AFTER_RESTORE)
        await run_bot_until_sent(config, database, slack, everything | {"job:4:end"}, log)

        texts = [m.get("text") for m in slack.messages.values()]
        history_reads = len(slack.calls_to("conversations.history"))
    for message in [*QUEUED_AT_BACKUP, DECIDED_AFTER_BACKUP, NEW_AFTER_RESTORE]:
        assert texts.count(message.text) == 1, (message.key, texts, log.read_text())
    assert history_reads >= 4, "each of the restored bot's DMs was looked for first"


def test_restore_refuses_while_the_bot_runs_and_what_is_not_a_backup(tmp_path: Path) -> None:
    database = tmp_path / "skybot.db"
    config = tmp_path / "skybot.toml"
    config.write_text(f'[database]\npath = "{database}"\n')
    add(database, *QUEUED_AT_BACKUP)
    not_a_backup = skybot("restore", str(database), config=config)
    assert not_a_backup.returncode == 1
    assert not_a_backup.stderr == (
        f"skybot restore: {database} is not a backup `skybot backup` made\n"
    )
    missing = skybot("restore", str(tmp_path / "nothing.db"), config=config)
    assert missing.stderr == f"skybot restore: {tmp_path}/nothing.db does not exist\n"
