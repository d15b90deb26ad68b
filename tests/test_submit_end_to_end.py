"""`/sky link`, `/sky submit` and `/sky cancel` end to end: Slack stand-in over Socket Mode,
the real bot, real sudo and the runner, real users, and the real Slurm test cluster."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from msgspec.structs import replace

from bot import __version__
from bot.config import (
    Config,
    DatabaseConfig,
    IdentityConfig,
    RunnerConfig,
    SlackConfig,
    SlurmConfig,
    SubmitConfig,
    load_config,
)
from bot.install import runner_text
from store.db import open_db
from tests.support.bot_process import running_bot, start_bot
from tests.support.cluster import as_user, squeue_json, wait_for
from tests.support.slack_standin import SlackStandIn, SlackUser

pytestmark = pytest.mark.cluster

TEAM = "T0STANDIN"
ALICE, BOB, EVE = "UALICE", "UBOB", "UEVE"
ALICE_DIR = Path("/srv/hoffman-lab/flash9/alice")
BOB_DIR = Path("/srv/hoffman-lab/flash9/bob")


def _config(tmp_path: Path) -> Config:
    base = load_config(None)
    return replace(
        base,
        slack=SlackConfig(mode="socket"),
        slurm=SlurmConfig(poll_seconds=1, caps_poll_seconds=30),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
        # bob is vouched for by the admins; alice has to prove who she is.
        identity=IdentityConfig(links={f"{TEAM}/{BOB}": "bob"}),
        submit=SubmitConfig(max_queued_per_user=20, max_per_minute=20),
    )


def _write_as(user: str, path: Path, text: str, mode: int = 0o644) -> None:
    entry = pwd.getpwnam(user)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    path.chmod(mode)


def _script(
    directory: Path, name: str, user: str, body: str = "whoami > whoami.txt", sleep: int = 120
) -> Path:
    path = directory / name
    _write_as(
        user,
        path,
        f"#!/bin/bash\n#SBATCH --partition=debug\n#SBATCH --output=/dev/null\n{body}\n"
        f"sleep {sleep}\n",
    )
    return path


def _put_link_code(user: str, code: str) -> None:
    """What the user runs on a login node, as the link instructions say."""
    as_user(user, "sh", "-c", f"mkdir -p ~/.config/skybot && echo {code} > ~/.config/skybot/link")


class Bot:
    def __init__(self, slack: SlackStandIn) -> None:
        self.slack = slack

    async def sky(self, user_id: str, text: str) -> str:
        delivery = await self.slack.send_slash_command(
            command="/sky", text=text, user_id=user_id, team_id=TEAM, timeout=10
        )
        assert delivery.payload is not None, f"no answer to /sky {text}"
        return str(delivery.payload["text"])

    async def dm(self, user_id: str, containing: str, timeout: float = 30) -> str:
        call = await self.slack.wait_for_call(
            "chat.postMessage",
            timeout=timeout,
            predicate=lambda c: (
                c.ok
                and c.params.get("channel") in (user_id, self.slack.dm_channel_for(user_id))
                and containing in str(c.params.get("text"))
            ),
        )
        return str(call.params["text"])


@pytest.fixture
async def bot(tmp_path: Path, clean_queue: None, checkout_runner: None) -> AsyncIterator[Bot]:
    users = [SlackUser(ALICE, "alice"), SlackUser(BOB, "bob"), SlackUser(EVE, "eve")]
    try:
        async with (
            SlackStandIn(users=users) as slack,
            running_bot(_config(tmp_path), slack, stop_timeout=20),
        ):
            await slack.wait_for_socket_connection(timeout=15)
            yield Bot(slack)
    finally:
        for path in (
            ALICE_DIR / "submit-me.sh",
            ALICE_DIR / "whoami.txt",
            BOB_DIR / "bobs.sh",
            ALICE_DIR / "planted.sh",
        ):
            path.unlink(missing_ok=True)
        for home in ("alice", "bob"):
            shutil.rmtree(Path("/home") / home / ".config/skybot", ignore_errors=True)


async def _link_alice(bot: Bot) -> None:
    answer = await bot.sky(ALICE, "link alice")
    code = answer.split("echo ", 1)[1].split(" ", 1)[0]
    _put_link_code("alice", code)
    assert "Linked: you are `alice`" in await bot.sky(ALICE, "link check")


async def test_alice_submits_as_alice_sees_it_and_only_she_can_cancel_it(bot: Bot) -> None:
    assert "link it with `/sky link" in await bot.sky(ALICE, "submit job.sh")
    await _link_alice(bot)
    assert "You are `alice` on the cluster (proven with a link code" in await bot.sky(
        ALICE, "whoami"
    )

    _script(ALICE_DIR, "submit-me.sh", "alice")
    queued = await bot.sky(ALICE, f"submit {ALICE_DIR}/submit-me.sh --time 5 --notify-start")
    assert queued.startswith("Queued as #") and queued.endswith("and again when it starts.")
    dm = await bot.dm(ALICE, "Slurm job")
    job_id = int(dm.split("Slurm job *", 1)[1].split("*", 1)[0])
    # `--notify-start` was skybot's, not sbatch's: the job runs, and its start is DM'd.
    started = await bot.dm(ALICE, f"▶️ Job {job_id} ")
    assert "started on `" in started and "time limit ends" in started

    # It ran as alice: its output file is hers and says so.
    out = ALICE_DIR / "whoami.txt"
    await wait_for(lambda: out.exists() and out.read_text().strip(), 30, "the job's output")
    assert out.read_text().strip() == "alice"
    assert out.stat().st_uid == pwd.getpwnam("alice").pw_uid

    async def listed() -> bool:
        return str(job_id) in await bot.sky(ALICE, "jobs")

    await wait_for(listed, 30, f"/sky jobs to list job {job_id}")

    # Refused by skybot from its snapshot, before the runner (and Slurm) is asked.
    refused = await bot.sky(BOB, f"cancel {job_id}")
    assert refused.startswith(f"Job `{job_id}` belongs to `alice`, not to you (`bob`)"), refused
    assert any(j["job_id"] == job_id for j in (await asyncio.to_thread(squeue_json))["jobs"])
    cancelled = await bot.sky(ALICE, f"cancel {job_id}")
    assert cancelled == f"Cancelled job `{job_id}` `submit-me.sh` (as `alice`).", cancelled
    await wait_for(
        lambda: all(j["job_id"] != job_id for j in squeue_json()["jobs"]), 30, "the job to go"
    )


async def test_bad_submissions_are_refused_and_nothing_runs(bot: Bot) -> None:
    await _link_alice(bot)
    _script(BOB_DIR, "bobs.sh", "bob")
    planted = _script(ALICE_DIR, "planted.sh", "bob")  # bob's file in alice's directory
    before = len((await asyncio.to_thread(squeue_json))["jobs"])
    immediate = {
        "submit /srv/hoffman-lab/flash9/alice/x.sh --wrap=id": "is not an option",
        "submit x.sh --uid=0": "is not an option",
        "submit x.sh -o /etc/x": "is not an option",
        "submit x.sh --job-name 'a;rm -rf ~'": "will not pass on",
        "submit x.sh --time '1\n2'": "will not pass on",
        "submit --notify-start": "Which script?",  # bare `submit` opens the job form
    }
    for text, expected in immediate.items():
        assert expected in await bot.sky(ALICE, text), text
    via_runner = {
        "/etc/passwd": "",
        f"{ALICE_DIR}/../bob/bobs.sh": "",
        f"{BOB_DIR}/bobs.sh": "",
        str(planted): "",
        str(ALICE_DIR): "",
        f"{ALICE_DIR}/missing.sh": "",
    }
    for path in via_runner:
        assert (await bot.sky(ALICE, f"submit {path}")).startswith("Queued as #")
        refusal = await bot.dm(ALICE, f"Could not submit `{path}`")
        via_runner[path] = refusal
    assert all(len(message) > 40 for message in via_runner.values()), via_runner
    assert len((await asyncio.to_thread(squeue_json))["jobs"]) == before


async def test_unlinked_users_and_codes_in_someone_elses_home_get_nowhere(bot: Bot) -> None:
    assert "link it with `/sky link YOUR_CLUSTER_USER`" in await bot.sky(EVE, "jobs")
    assert "There is no cluster account `root`" in await bot.sky(EVE, "link root")
    answer = await bot.sky(EVE, "link alice")
    code = answer.split("echo ", 1)[1].split(" ", 1)[0]
    # The code lands in bob's home, not alice's: that proves nothing about alice.
    _put_link_code("bob", code)
    assert (await bot.sky(EVE, "link check")).startswith("Not linked")
    assert "does not know your cluster account" in await bot.sky(EVE, "whoami")


def _tagged_jobs(comment: str) -> list[int]:
    """Every job with this comment that Slurm has, running (squeue) or ended (sacct, which
    stores comments of ended jobs with AccountingStoreFlags=job_comment, as
    deploy/testcluster.sh sets and the README asks admins to)."""
    out = subprocess.run(
        ["sacct", "--json", "-X", "--allusers", "--starttime", "now-1hours"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    ended = {
        j["job_id"]
        for j in json.loads(out)["jobs"]
        if (j.get("comment") or {}).get("job") == comment
    }
    live = {j["job_id"] for j in squeue_json()["jobs"] if j.get("comment") == comment}
    return sorted(ended | live)


def _in_squeue(job_id: int) -> bool:
    return any(j["job_id"] == job_id for j in squeue_json(active_only=False)["jobs"])


@pytest.mark.lane_only
@pytest.mark.parametrize("job_ended_before_restart", [False, True], ids=["running", "ended"])
async def test_killed_between_queueing_and_submitting_submits_exactly_once(
    tmp_path: Path, clean_queue: None, job_ended_before_restart: bool
) -> None:
    """SIGKILL the real `skybot run` process while sbatch is in flight; restart; count jobs.

    "ended": the job finishes and leaves squeue while skybot is down, so only sacct (with job
    comments stored) can tell the restarted bot that the submission did reach Slurm.
    """
    slow_sudo = tmp_path / "slow-sudo"
    started = tmp_path / "runner-started"
    # Holds the submission in 'submitting' long enough to kill the bot there, once the runner
    # is on its way (the marker): sbatch then happens while skybot is down.
    slow_sudo.write_text(f'#!/bin/sh\ntouch {started}\nsleep 3\nexec /usr/bin/sudo "$@"\n')
    slow_sudo.chmod(0o755)
    config_file = tmp_path / "skybot.toml"
    config_file.write_text(
        f'[slack]\nmode = "socket"\n[slurm]\npoll_seconds = 1\n'
        f'[database]\npath = "{tmp_path}/skybot.db"\n'
        f'[identity]\nlinks = {{ "{TEAM}/{ALICE}" = "alice" }}\n'
        f'[runner]\nsudo = "{slow_sudo}"\n'
        '[[labs]]\nname = "hoffman-lab"\npartition = "hoffman-lab"\naccount = "hoffman-lab"\n'
        'storage_roots = ["/srv/hoffman-lab/flash9"]\n'
    )
    _script(ALICE_DIR, "submit-me.sh", "alice", sleep=0 if job_ended_before_restart else 120)
    async with SlackStandIn(users=[SlackUser(ALICE, "alice")]) as slack:

        def start() -> subprocess.Popen[bytes]:
            return start_bot(config_file, slack)

        first = start()
        try:
            await slack.wait_for_socket_connection(timeout=20)
            bot = Bot(slack)
            queued = await bot.sky(ALICE, f"submit {ALICE_DIR}/submit-me.sh")
            assert queued.startswith("Queued as #1")
            db = open_db(tmp_path / "skybot.db")
            await wait_for(started.exists, 10, "the worker to pick the submission up", 0.05)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        finally:
            if first.poll() is None:
                first.kill()
        tag = db.execute("SELECT tag FROM submissions").fetchone()[0]
        assert db.execute("SELECT state FROM submissions").fetchone()[0] == "submitting"
        if job_ended_before_restart:
            (job,) = await wait_for(
                lambda: _tagged_jobs(f"skybot:{tag}"), 30, "the job to reach sacct"
            )
            await wait_for(lambda: not _in_squeue(job), 60, "the ended job to leave squeue")

        second = start()
        try:
            await slack.wait_for_socket_connection(count=2, timeout=20)
            await wait_for(
                lambda: db.execute("SELECT state FROM submissions").fetchone()[0] == "submitted",
                40,
                "the restarted bot to settle it",
                0.2,
                in_thread=False,  # the test's own sqlite connection
            )
            await asyncio.sleep(5)  # room for a wrong second submission to reach sacct
            jobs = await asyncio.to_thread(_tagged_jobs, f"skybot:{tag}")
            recorded = db.execute("SELECT job_id FROM submissions").fetchone()[0]
            assert jobs == [recorded], f"expected exactly one job, Slurm has {jobs}"
        finally:
            second.terminate()
            second.wait(timeout=20)
            db.close()
            (ALICE_DIR / "submit-me.sh").unlink(missing_ok=True)
            (ALICE_DIR / "whoami.txt").unlink(missing_ok=True)
    print(f"exactly once: job {recorded} for submission #1 across a SIGKILL")


async def test_a_runner_of_another_version_is_refused_at_submit_with_the_fix(
    tmp_path: Path, clean_queue: None, caplog: pytest.LogCaptureFixture
) -> None:
    """The installed runner came from another skybot: bob is told why nothing was submitted
    and what the admins must do, and the log says so at error level. The runner is a real
    copy with another version written in, run as bob by runuser in sudo's place (sudo may
    start only the installed runner, which other tests share)."""
    other = Path(tempfile.mkdtemp(prefix="skybot-old-runner-", dir="/tmp"))
    try:
        other.chmod(0o755)
        runner = other / "skybot-runner"
        current = runner_text("/usr/bin/python3")  # this checkout's, as installed
        runner.write_text(
            current.replace(f'\nVERSION = "{__version__}"\n', '\nVERSION = "0.0.1"\n')
        )
        runner.chmod(0o755)
        sudo = other / "sudo"
        # Called as `sudo -n -u USER -- RUNNER`: $3 is the user.
        sudo.write_text(f'#!/bin/sh\nexec /usr/sbin/runuser -u "$3" -- {runner}\n')
        sudo.chmod(0o755)
        config = replace(_config(tmp_path), runner=RunnerConfig(sudo=str(sudo)))
        _script(BOB_DIR, "bobs.sh", "bob")
        async with (
            SlackStandIn(users=[SlackUser(BOB, "bob")]) as slack,
            running_bot(config, slack, stop_timeout=20),
        ):
            await slack.wait_for_socket_connection(timeout=15)
            bot = Bot(slack)
            assert (await bot.sky(BOB, f"submit {BOB_DIR}/bobs.sh")).startswith("Queued as #")
            dm = await bot.dm(BOB, f"Could not submit `{BOB_DIR}/bobs.sh`")
    finally:
        shutil.rmtree(other)
        (BOB_DIR / "bobs.sh").unlink(missing_ok=True)
    # The reason is quoted as a literal in the DM, so only its words are compared.
    assert (
        f"its runner ({RunnerConfig().path}) is version 0.0.1 but the bot is {__version__}." in dm
    )
    assert "skybot install runner" in dm
    assert [r for r in caplog.records if r.levelname == "ERROR" and "version 0.0.1" in r.message]
    assert (await asyncio.to_thread(squeue_json))["jobs"] == []
