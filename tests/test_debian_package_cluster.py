"""The Debian package (deploy/build-deb.sh) installed on this machine the way a site does it,
`apt-get install ./skybot_*.deb`: its unit passes `systemd-analyze verify`, the packaged bot,
as the package's service user, answers `/sky gpus` from the real cluster through the Slack
stand-in, and the packaged runner submits a job as alice through the packaged sudoers rule. An
upgrade keeps the admin's config edit and the database, and the upgraded bot sends what was
queued before it once; remove keeps the data, purge removes it.

The package lives beside this machine's development install: its runner is
/usr/libexec/skybot/skybot-runner with the rule /etc/sudoers.d/skybot-runner, so
deploy/install-runner.sh's /usr/local/libexec/skybot-runner and /etc/sudoers.d/skybot (which
other tests use) are left as they were, and checked to be. The package is purged at the end.
The .deb is built in the background from the start of the session (tests/support/wheels.py).
"""

from __future__ import annotations

import asyncio
import grp
import hashlib
import json
import os
import pwd
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import wheels
from tests.support.bot_process import SLACK_IDS, linked_users, start_bot
from tests.support.cluster import sbatch, squeue_state, wait_for, wait_until
from tests.support.slack_standin import SlackStandIn

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(
        "SKYBOT_TESTCLUSTER" in os.environ,
        reason="inside the Slurm 24.11 sandbox: no package index or dpkg tooling",
    ),
]

VENV = Path("/usr/lib/skybot")
SKYBOT = VENV / "bin" / "skybot"
RUNNER = "/usr/libexec/skybot/skybot-runner"
CONFIG = Path("/etc/skybot/skybot.toml")
STATE = Path("/var/lib/skybot")
UNIT = Path("/lib/systemd/system/skybot.service")
# deploy/install-runner.sh's, which the other cluster tests use: the package must not touch them.
DEVELOPMENT_FILES = (Path("/etc/sudoers.d/skybot"), Path("/usr/local/libexec/skybot-runner"))
AS_SKYBOT = ["/usr/sbin/runuser", "-u", "skybot", "--"]
HOFFMAN = Path("/srv/hoffman-lab/flash9")
TEST_CONFIG = f"""# the admin's edit
[slack]
mode = "socket"
[metrics]
port = 0
[slurm]
poll_seconds = 2
[runner]
path = "{RUNNER}"
[[labs]]
name = "hoffman-lab"
partition = "hoffman-lab"
account = "hoffman-lab"
storage_roots = ["{HOFFMAN}"]
"""


def sh(*argv: str, timeout: float = 600, input: str | None = None) -> str:
    result = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout, input=input,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"{list(argv)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def apt_get(*args: str) -> str:
    return sh("apt-get", "-y", "-q", "-o", "Dpkg::Options::=--force-confold", *args)


def installed_version() -> str | None:
    result = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status} ${Version}", "skybot"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    status = result.stdout.split()
    return status[-1] if result.returncode == 0 and "installed" in status[:3] else None


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


def refuse_a_rule_that_would_break_sudo(deb: Path, folder: Path) -> None:
    """sudo refuses every rule while any file is wrong (a second definition of an alias once
    was): check the package's rule together with this machine's before installing it."""
    sh("dpkg-deb", "-x", str(deb), str(folder / "tree"))
    combined = folder / "sudoers"
    combined.write_text(
        Path("/etc/sudoers").read_text() + f"\n@include {folder}/tree/etc/sudoers.d/skybot-runner\n"
    )
    sh("visudo", "-cf", str(combined))


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The built .deb, installed for this module's tests and purged after them."""
    deb = wheels.debian_package()
    if installed_version() is not None or CONFIG.exists():
        pytest.fail(f"this machine already has a skybot package or {CONFIG}: remove it first")
    before = {path: digest(path) for path in DEVELOPMENT_FILES}
    refuse_a_rule_that_would_break_sudo(deb, tmp_path_factory.mktemp("deb-rule"))
    apt_get("install", str(deb))
    try:
        yield deb
    finally:
        if installed_version() is not None or Path("/var/lib/dpkg/info/skybot.list").exists():
            apt_get("purge", "skybot")
        assert {path: digest(path) for path in DEVELOPMENT_FILES} == before


def test_what_the_package_installs(package: Path) -> None:
    version = installed_version()
    assert version and package.name == f"skybot_{version}_amd64.deb"
    assert sh(str(SKYBOT), "--version").strip() == f"skybot {version}"
    runner = Path(RUNNER).read_text()
    assert runner.startswith("#!/usr/bin/python3 -IS\n") and f'\nVERSION = "{version}"\n' in runner
    assert f'path = "{RUNNER}"' in CONFIG.read_text()
    # root:skybot 0640 (dpkg-statoverride), the state directory the service user's own.
    config = CONFIG.stat()
    assert (config.st_uid, grp.getgrgid(config.st_gid).gr_name, config.st_mode & 0o777) == (
        0, "skybot", 0o640,
    )  # fmt: skip
    state = STATE.stat()
    assert pwd.getpwuid(state.st_uid).pw_name == "skybot" and state.st_mode & 0o777 == 0o750
    assert Path("/etc/sudoers.d/skybot-runner").stat().st_mode & 0o777 == 0o440
    rule = Path("/etc/sudoers.d/skybot-runner").read_text()
    assert f'Cmnd_Alias SKYBOT_PACKAGED_RUNNER = {RUNNER} ""' in rule
    sh("visudo", "-c")
    assert "/usr/share/skybot/skybot.rules.yml" in sh("dpkg", "-L", "skybot")
    conffiles = sh("dpkg-query", "-W", "-f=${Conffiles}", "skybot")
    assert str(CONFIG) in conffiles and "/etc/sudoers.d/skybot-runner" in conffiles


def test_systemd_analyze_verifies_the_installed_unit(package: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is missing: deploy/dev-setup.sh installs systemd")
    assert f"\nExecStart={SKYBOT} run --config {CONFIG}\n" in UNIT.read_text()
    result = subprocess.run([analyze, "verify", str(UNIT)], capture_output=True, text=True)
    assert result.returncode == 0 and not (result.stdout + result.stderr).strip(), (
        result.stdout + result.stderr
    )


@pytest.fixture
def running_job(clean_queue: None) -> int:
    """alice holds 2 of hoffman-lab's GPUs, running before the bot's first poll."""
    job = sbatch(
        "alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "--gpus-per-node=a40:2",
        "--chdir=/tmp", "--wrap", "sleep 300",
    )  # fmt: skip
    wait_until(lambda: squeue_state(job) == "RUNNING", 30, "alice's job to run")
    return job


async def test_the_packaged_bot_answers_sky_gpus_as_the_service_user(
    package: Path, running_job: int, tmp_path: Path
) -> None:
    CONFIG.write_text(TEST_CONFIG)  # the admin edits the packaged config
    log_path = tmp_path / "skybot.log"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    text = ""
    async with SlackStandIn() as slack:
        with log_path.open("wb") as log:
            bot = start_bot(
                CONFIG, slack, [*AS_SKYBOT, str(SKYBOT)], cwd=Path("/"),
                environment=environment, log=log,
            )  # fmt: skip
            try:
                await slack.wait_for_socket_connection(timeout=60)

                async def answered() -> str | None:
                    delivery = await slack.send_slash_command(
                        command="/sky", text="gpus hoffman-lab", user_id="UALICE", timeout=20
                    )
                    text = str((delivery.payload or {}).get("text"))
                    return None if "has not heard from Slurm yet" in text else text

                text = await wait_for(answered, 60, "an answer from Slurm's data", 0.5)
            except (TimeoutError, AssertionError):
                pytest.fail(f"the packaged skybot did not answer:\n{log_path.read_text()}")
            finally:
                bot.terminate()
                await asyncio.to_thread(bot.wait, 30)
    log_text = log_path.read_text()
    assert "*`hoffman-lab`*: 2/4 GPUs in use (2 free under the cap)" in text, log_text
    assert re.search(
        r"skybot \S+ starting: database schema \d+ \(/var/lib/skybot/skybot.db\)", log_text
    )
    assert pwd.getpwuid((STATE / "skybot.db").stat().st_uid).pw_name == "skybot"


# What the packaged bot sends for `/sky submit`, made by the packaged skybot's own client.
CALL_RUNNER = """
import asyncio, json, sys
from bot.runner_client import call_runner
request = json.loads(sys.argv[1])
prefix = ["/usr/sbin/runuser", "-u", "skybot", "--"]
print(json.dumps(asyncio.run(call_runner("alice", request, runner=sys.argv[2], prefix=prefix))))
"""


def test_the_packaged_runner_submits_as_alice_through_the_packaged_rule(
    package: Path, clean_queue: None
) -> None:
    script = HOFFMAN / "alice" / "packaged-runner-job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --job-name=packaged-runner\nsleep 60\n")
    alice = pwd.getpwnam("alice")
    os.chown(script, alice.pw_uid, alice.pw_gid)
    try:
        request = {
            "action": "submit", "script": str(script),
            "options": {"partition": "debug", "account": "hoffman-lab", "time": "2"},
            "roots": [str(HOFFMAN)], "partitions": ["hoffman-lab", "debug"],
        }  # fmt: skip
        python = str(VENV / "bin" / "python3")
        # -I: the venv's own skybot, never this checkout's (the current directory).
        reply = json.loads(sh(python, "-I", "-c", CALL_RUNNER, json.dumps(request), RUNNER))
        assert reply.get("ok") is True, reply
        job = int(reply["job_id"])
        owner = sh("squeue", "-h", "-j", str(job), "-o", "%u").strip()
        assert owner == "alice", (reply, owner)
        # The packaged rule is what allows it: only /etc/sudoers.d/skybot-runner names this path.
        assert RUNNER in sh("sudo", "-l", "-U", "skybot")
        assert RUNNER not in Path("/etc/sudoers.d/skybot").read_text()
    finally:
        script.unlink(missing_ok=True)


def repacked_with_version(deb: Path, version: str, folder: Path) -> Path:
    """The same package under a higher version: what dpkg does on an upgrade (conffiles,
    maintainer scripts, the state directory) does not depend on what changed in the code."""
    tree = folder / "tree"
    sh("dpkg-deb", "-R", str(deb), str(tree))
    control = tree / "DEBIAN" / "control"
    control.write_text(
        re.sub(r"^Version: .*$", f"Version: {version}", control.read_text(), flags=re.M)
    )
    newer = folder / f"skybot_{version}_amd64.deb"
    sh("dpkg-deb", "-Zgzip", "-z1", "-b", str(tree), str(newer))
    shutil.rmtree(tree)
    return newer


# Written by the installed package's own store code, as the service user (whose database it is).
QUEUE_DMS = """
import sys, time
from store.db import open_db
from store.outbox import OutboxMessage, enqueue
db = open_db(sys.argv[1])
enqueue(db, [OutboxMessage(key=f"before-upgrade-{i}", target="UALICE",
                           text=f"queued before the upgrade #{i}") for i in range(3)], time.time())
db.close()
"""


def all_sent(database: Path) -> bool:
    with sqlite3.connect(database, timeout=5) as db:
        states = db.execute("SELECT state FROM outbox WHERE target = 'UALICE'").fetchall()
    return states == [("sent",)] * 3


async def test_an_upgrade_keeps_the_config_edit_and_the_database_and_sends_once(
    package: Path, tmp_path: Path
) -> None:
    database = STATE / "skybot.db"
    if not database.exists():
        pytest.fail("the bot test before this one leaves the database this test upgrades over")
    sh(*AS_SKYBOT, str(VENV / "bin" / "python3"), "-I", "-c", QUEUE_DMS, str(database))
    old = installed_version()
    assert old is not None
    newer = repacked_with_version(package, f"{old}.1", tmp_path)
    apt_get("install", str(newer))
    assert installed_version() == f"{old}.1"
    assert CONFIG.read_text() == TEST_CONFIG
    log_path = tmp_path / "skybot.log"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    async with SlackStandIn(users=linked_users()) as slack:
        with log_path.open("wb") as log:
            bot = start_bot(
                CONFIG, slack, [*AS_SKYBOT, str(SKYBOT)], cwd=Path("/"),
                environment=environment, log=log,
            )  # fmt: skip
            try:
                await wait_for(lambda: all_sent(database), 120, "the queued DMs sent")
            finally:
                bot.terminate()
                await asyncio.to_thread(bot.wait, 30)
        dm = slack.dm_channel_for(SLACK_IDS["alice"])
        texts = [m.get("text", "") for (channel, _), m in slack.messages.items() if channel == dm]
    for i in range(3):
        assert texts.count(f"queued before the upgrade #{i}") == 1, (texts, log_path.read_text())


def test_remove_keeps_the_data_and_purge_removes_it(package: Path) -> None:
    apt_get("remove", "skybot")
    assert not SKYBOT.exists() and not Path(RUNNER).exists()
    # Conffiles stay until purge; the rule names a program that is gone, so it allows nothing.
    assert (STATE / "skybot.db").exists() and CONFIG.read_text() == TEST_CONFIG
    apt_get("purge", "skybot")
    assert not STATE.exists() and not CONFIG.exists()
    assert not Path("/etc/sudoers.d/skybot-runner").exists()
    assert not Path("/etc/skybot/skybot.env").exists()
    assert installed_version() is None
