"""Issue 27, item 4: a DM cut off mid-send by kill -9 arrives once, whatever the step.

The real `skybot run` process against the Slack stand-in. One DM waits in the outbox; the bot
is SIGKILLed at one step of sending it, then started again, and the stand-in must hold exactly
one copy:

- before the call: the request never reaches Slack (the stand-in holds it and drops it when
  the bot dies);
- while the answer is late: Slack stored the DM, its answer is 15 s late (as seen on site);
- after the answer, before the "sent" mark: Slack answered, but the bot's database write is
  held (a test connection holds SQLite's write lock) when it dies.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from store.db import open_db
from store.outbox import OutboxMessage, enqueue
from tests.support.bot_process import VERBOSE_SKYBOT, start_bot
from tests.support.cluster import wait_for
from tests.support.slack_standin import SlackStandIn, SlackUser

ALICE = "UALICE"
TEXT = "Job 9092 (train) completed after 2:01:00."
STEPS = ["before the call", "while the answer is late", "after the answer, before marking sent"]


def _received_answer(log: Path) -> bool:
    """The bot's Slack client logged chat.postMessage's answer for the DM."""
    lines = log.read_text(errors="replace").splitlines()
    return any("Received the following response" in line and TEXT in line for line in lines)


def outbox_row(database: Path) -> tuple[str, float | None]:
    """The DM's state and sending_since, as the bot (another process) left them."""
    connection = sqlite3.connect(database, timeout=10)
    try:
        row = connection.execute("SELECT state, sending_since FROM outbox").fetchone()
        return str(row[0]), row[1]
    finally:
        connection.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("step", STEPS)
async def test_a_dm_cut_off_by_kill_9_arrives_once(tmp_path: Path, step: str) -> None:
    database = tmp_path / "skybot.db"
    config_file = tmp_path / "skybot.toml"
    # Polls rarely: this test is about the outbox, not Slurm.
    config_file.write_text(
        f'[slack]\nmode = "socket"\n[slurm]\npoll_seconds = 60\n[database]\npath = "{database}"\n'
    )
    db = open_db(database)
    enqueue(db, [OutboxMessage("job:9092:end", ALICE, TEXT)], time.time())
    db.close()
    log_path = tmp_path / "bot.log"
    log = log_path.open("ab")
    async with SlackStandIn(users=[SlackUser(ALICE, "alice")]) as slack:

        def copies() -> list[str]:
            return [ts for (_, ts), m in slack.messages.items() if m.get("text") == TEXT]

        blocker: sqlite3.Connection | None = None
        if step == STEPS[0]:
            slack.hold_next("chat.postMessage", 30)
        else:
            slack.answer_late("chat.postMessage", 15 if step == STEPS[1] else 2)
        first = start_bot(config_file, slack, VERBOSE_SKYBOT, log=log)
        second: subprocess.Popen[bytes] | None = None
        try:
            if step == STEPS[0]:
                await slack.wait_until_holding("chat.postMessage", timeout=30)
            else:
                await wait_for(copies, 30, "Slack to store the DM", 0.05, in_thread=False)
            if step == STEPS[2]:
                blocker = sqlite3.connect(database, timeout=10, isolation_level=None)
                blocker.execute("BEGIN IMMEDIATE")  # the bot's next write waits for this
                await wait_for(
                    lambda: slack.calls_to("chat.postMessage"),
                    10,
                    "Slack's answer",
                    0.05,
                    in_thread=False,
                )
                # The bot has the answer (its client logs it), and waits to record it.
                await wait_for(lambda: _received_answer(log_path), 10, "the bot to get it", 0.05)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
            if blocker is not None:
                blocker.rollback()
            assert len(copies()) == (0 if step == STEPS[0] else 1)
            state, sending_since = outbox_row(database)
            assert state == "queued" and sending_since is not None, (state, sending_since)

            second = start_bot(config_file, slack, log=log)
            # Marked sent only after Slack's answer: every copy this bot posted is in Slack.
            await wait_for(lambda: outbox_row(database)[0] == "sent", 40, "the DM settled", 0.05)
        finally:
            for bot in (first, second):
                if bot is not None and bot.poll() is None:
                    bot.kill()
                    bot.wait(timeout=10)
            if blocker is not None:
                blocker.close()
            log.close()
        assert len(copies()) == 1, f"{len(copies())} copies of the DM in Slack"
        # The restarted bot asked Slack before deciding.
        assert slack.calls_to("conversations.history")
        history = slack.calls_to("conversations.history")[0]
        assert str(history.params.get("include_all_metadata")).lower() in ("true", "1")
