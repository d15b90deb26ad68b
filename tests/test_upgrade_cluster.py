"""An upgrade as the README tells a site to do it: the previous release's wheel installed and
running up a database, then a plain `pip install --upgrade` of this tree's wheel (no
`--force-reinstall`), then `skybot run`. The new code runs, the schema is migrated, and what
the old bot had accepted (queued DMs, a submission caught mid-sbatch) is delivered once.

Every build was `0.1.0` before the version came from git, so pip said "already installed" and
kept the old code (issue 28, item 2).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import pytest

from tests.support import wheels
from tests.support.bot_process import SLACK_IDS, linked_users, start_bot
from tests.support.cluster import sbatch, wait_for
from tests.support.slack_standin import SlackStandIn
from tests.support.wheels import run

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(
        "SKYBOT_TESTCLUSTER" in os.environ,
        reason="inside the Slurm 24.11 sandbox: no package index to install the wheels from",
    ),
]

QUEUED_DMS = 3

# What the previous release writes into its own database, through its own store functions.
FILL_WITH_THE_OLD_CODE = """
import sys, time
from store.db import open_db
from store.outbox import OutboxMessage, enqueue
from store.submissions import claim_next, enqueue as submit
db = open_db(sys.argv[1])
enqueue(db, [OutboxMessage(key=f"before-upgrade-{i}", target="UALICE",
                           text=f"queued before the upgrade #{i}")
             for i in range(int(sys.argv[2]))],
        time.time())
submission = submit(db, team_id="T0STANDIN", user_id="UALICE", cluster_user="alice",
                    script="/tmp/job.sh", options={}, response_url=None, now=time.time(),
                    max_queued=5, max_per_minute=5)
claim_next(db, time.time())  # the old bot was stopped while sbatch ran
print(submission.tag)
"""


def write_config(directory: Path) -> Path:
    config = directory / "skybot.toml"
    config.write_text(
        f'[database]\npath = "{directory}/skybot.db"\n'
        '[slack]\nmode = "socket"\n'
        "[slurm]\npoll_seconds = 2\n"
        '[[labs]]\nname = "hoffman-lab"\npartition = "hoffman-lab"\naccount = "hoffman-lab"\n'
        'storage_roots = ["/srv/hoffman-lab/flash9"]\n'
    )
    return config


def version_of(skybot: Path) -> str:
    return run([str(skybot), "--version"], skybot.parent).split()[-1]


async def test_a_plain_pip_upgrade_runs_the_new_code_and_loses_or_repeats_nothing(
    tmp_path: Path, clean_queue: None
) -> None:
    # A fresh venv with the previous release installed (tests/support/wheels.py: made in the
    # background since the session began).
    venv = wheels.previous_release_venv()
    pip, skybot, python = (str(venv / "bin" / n) for n in ("pip", "skybot", "python3"))
    old_version = version_of(Path(skybot))
    assert old_version == "0.1.0"

    database = tmp_path / "skybot.db"
    fill = [python, "-c", FILL_WITH_THE_OLD_CODE, str(database), str(QUEUED_DMS)]
    tag = run(fill, tmp_path).strip()
    old_schema = sqlite3.connect(database).execute("PRAGMA user_version").fetchone()[0]
    # The submission reached Slurm before the old bot stopped: held, so it stays listed.
    job = sbatch("alice", "--hold", f"--comment=skybot:{tag}", "-p", "hoffman-lab",
                 "-A", "hoffman-lab", "--chdir=/tmp", "--wrap", "true")  # fmt: skip

    run([pip, "install", "--quiet", "--upgrade", str(wheels.checkout_wheel())], tmp_path)
    new_version = version_of(Path(skybot))
    assert new_version != old_version, "pip kept the old code"
    new_schema = int(
        run(
            [python, "-c", "from store.db import SCHEMA_VERSION; print(SCHEMA_VERSION)"], tmp_path
        ).strip()
    )

    log = tmp_path / "skybot.log"
    async with SlackStandIn(users=linked_users()) as slack:
        with log.open("wb") as output:
            bot = start_bot(write_config(tmp_path), slack, [skybot], cwd=tmp_path, log=output,
                            environment={k: v for k, v in os.environ.items()
                                         if not k.startswith("PYTHON")})  # fmt: skip
            try:
                await wait_for(
                    lambda: all_told(database), timeout=120, what="every queued message sent"
                )
            finally:
                bot.terminate()
                await asyncio.to_thread(bot.wait, 30)
        dm = slack.dm_channel_for(SLACK_IDS["alice"])
        texts = [m.get("text", "") for (channel, _), m in slack.messages.items() if channel == dm]

    for i in range(QUEUED_DMS):
        assert texts.count(f"queued before the upgrade #{i}") == 1, (texts, log.read_text())
    reports = [t for t in texts if str(job) in t]
    assert len(reports) == 1, (texts, log.read_text())
    db = sqlite3.connect(database)
    assert db.execute("PRAGMA user_version").fetchone()[0] == new_schema >= old_schema
    assert db.execute("SELECT state, job_id FROM submissions").fetchall() == [("submitted", job)]


def all_told(database: Path) -> bool:
    """Every DM to alice the old bot queued, and the submission's report, marked sent."""
    with sqlite3.connect(database, timeout=5) as db:
        states = db.execute("SELECT state FROM outbox WHERE target = 'UALICE'").fetchall()
        (submission,) = db.execute("SELECT state FROM submissions").fetchone()
    return submission != "submitting" and states == [("sent",)] * (QUEUED_DMS + 1)
