"""Issue 27, item 3: a restart while sbatch still runs in the runner submits nothing twice.

The real `skybot run` process, the installed runner through real sudo, the real 22.05 cluster.
sbatch is made slow the way a site's would be: runner.toml's `sbatch` names a wrapper that
holds until the test releases it (once the restart it must outlast has happened), then execs
the real sbatch. The bot is stopped while the wrapper sleeps (SIGTERM or
SIGKILL to the main process only, as `kill` does and as systemd's KillMode=process would; or
SIGTERM to the bot and every process under it, as systemd's default KillMode=control-group
does) and started again at once: Slurm ends up with exactly one job carrying the
submission's tag, and alice is told about it once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot import __version__
from bot.runner_client import DEFAULT_RUNNER, call_runner
from core.runner_contract import submit_request, submit_status_request
from store.db import open_db
from tests.support.bot_process import start_bot
from tests.support.cluster import squeue_json, wait_for
from tests.support.slack_standin import SlackStandIn, SlackUser

pytestmark = pytest.mark.cluster

TEAM = "T0STANDIN"
ALICE = "UALICE"
ALICE_DIR = Path("/srv/hoffman-lab/flash9/alice")
RUNNER_TOML = Path("/etc/skybot/runner.toml")
RECORDS = Path("/home/alice/.local/state/skybot")
# The wrapper holds at most this long: the test releases it as soon as what must happen
# while sbatch works (a restart, a killed runner) has happened, instead of sleeping it out.
SLEEP = 30
AS_SKYBOT = ["/usr/sbin/runuser", "-u", "skybot", "--"]


@pytest.fixture
def slow_sbatch(checkout_runner: None) -> Iterator[Path]:
    """runner.toml pointing the runner at a wrapper that holds until `release` (SLEEP s at
    most) before the real sbatch; yields the wrapper's log (one line when it starts, one when
    it execs sbatch)."""
    where = Path(tempfile.mkdtemp(prefix="skybot-slow-sbatch-", dir="/tmp"))
    where.chmod(0o755)
    log = where / "log"
    log.touch()
    log.chmod(0o666)  # the wrapper runs as alice
    wrapper = where / "sbatch"
    wrapper.write_text(
        f'#!/bin/sh\necho "start $$" >> {log}\nn=0\n'
        f"while [ ! -e {_go(log)} ] && [ $n -lt {SLEEP * 10} ]; do sleep 0.1; n=$((n + 1)); done\n"
        f'echo "exec $$" >> {log}\nexec /usr/bin/sbatch "$@"\n'
    )
    wrapper.chmod(0o755)
    made_dir = not RUNNER_TOML.parent.exists()
    saved = RUNNER_TOML.with_name("runner.toml.skybot-test-saved")
    if RUNNER_TOML.exists():
        RUNNER_TOML.rename(saved)
    RUNNER_TOML.parent.mkdir(mode=0o755, exist_ok=True)
    RUNNER_TOML.write_text(f'sbatch = "{wrapper}"\n')
    RUNNER_TOML.chmod(0o644)
    try:
        yield log
    finally:
        RUNNER_TOML.unlink(missing_ok=True)
        if saved.exists():
            saved.rename(RUNNER_TOML)
        elif made_dir:
            RUNNER_TOML.parent.rmdir()
        shutil.rmtree(where, ignore_errors=True)
        shutil.rmtree(RECORDS, ignore_errors=True)


def _go(log: Path) -> Path:
    """The file whose existence lets the wrapper (every one, from now on) exec sbatch."""
    return log.with_name("go")


def release(log: Path) -> None:
    """Let the slow sbatch (the one holding now, and any started later) go on at once."""
    _go(log).touch()


def _descendants(pid: int) -> list[int]:
    """Every process under `pid` (sudo, the runner, the wrapper, sleep), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _stop(bot: subprocess.Popen[bytes], how: str) -> None:
    if how == "control-group":
        # systemd's default: SIGTERM to every process of the unit at once.
        for pid in [bot.pid, *_descendants(bot.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    else:
        bot.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
    bot.wait(timeout=20)


def _submission(database: Path) -> tuple[str, str, int | None] | None:
    """The one submission's state, tag and job id, read as the bot (another process) left it."""
    db = open_db(database)
    try:
        row = db.execute("SELECT state, tag, job_id FROM submissions").fetchone()
        return None if row is None else (row[0], row[1], row[2])
    finally:
        db.close()


def _tagged_jobs(comment: str) -> list[int]:
    """Every job with this comment that Slurm has: in squeue, or ended (sacct)."""
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


@pytest.mark.lane_only
@pytest.mark.parametrize("how", ["sigterm", "sigkill", "control-group"])
async def test_a_restart_while_sbatch_runs_gives_one_job_and_one_message(
    tmp_path: Path, clean_queue: None, slow_sbatch: Path, how: str
) -> None:
    config_file = tmp_path / "skybot.toml"
    config_file.write_text(
        f'[slack]\nmode = "socket"\n[slurm]\npoll_seconds = 1\n'
        f'[database]\npath = "{tmp_path}/skybot.db"\n'
        f'[identity]\nlinks = {{ "{TEAM}/{ALICE}" = "alice" }}\n'
        '[[labs]]\nname = "hoffman-lab"\npartition = "hoffman-lab"\naccount = "hoffman-lab"\n'
        'storage_roots = ["/srv/hoffman-lab/flash9"]\n'
    )
    script = ALICE_DIR / "once.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH --partition=debug\n#SBATCH --output=/dev/null\nsleep 120\n"
    )
    shutil.chown(script, "alice", "alice")
    async with SlackStandIn(users=[SlackUser(ALICE, "alice")]) as slack:
        log = (tmp_path / "bot.log").open("ab")  # both bots' output, for a failure's report
        first = start_bot(config_file, slack, log=log)
        second: subprocess.Popen[bytes] | None = None
        try:
            await slack.wait_for_socket_connection(timeout=20)
            delivery = await slack.send_slash_command(
                command="/sky", text=f"submit {script}", user_id=ALICE, team_id=TEAM, timeout=10
            )
            assert delivery.payload is not None
            assert str(delivery.payload["text"]).startswith("Queued as #1")
            await wait_for(lambda: "start" in slow_sbatch.read_text(), 20, "the slow sbatch")
            _stop(first, how)
            second = start_bot(config_file, slack, log=log)
            await slack.wait_for_socket_connection(count=2, timeout=20)
            if how != "control-group":
                # The point of the test: the new bot is up while the old runner still works.
                assert "exec" not in slow_sbatch.read_text(), "sbatch ran before the restart"
            release(slow_sbatch)

            def settled() -> tuple[str, int] | None:
                row = _submission(tmp_path / "skybot.db")
                if row is None or row[0] != "submitted" or row[2] is None:
                    return None
                return row[1], row[2]

            what = "the restarted bot to settle it"
            tag, recorded = await wait_for(settled, 3 * SLEEP + 30, what, interval=0.2)
            # Room for a wrong second submission. Its wrapper logs "start" at once (and, released
            # already, would sbatch at once too), so a few seconds show it.
            await asyncio.sleep(4)
            starts = slow_sbatch.read_text().split().count("start")
            # Under control-group the first wrapper died with the bot: one resubmission is right.
            assert starts == (2 if how == "control-group" else 1), slow_sbatch.read_text()
            jobs = await asyncio.to_thread(_tagged_jobs, f"skybot:{tag}")
            assert jobs == [recorded], f"expected exactly job {recorded}, Slurm has {jobs}"

            def told() -> list[str]:
                return [
                    str(call.params.get("text"))
                    for call in slack.calls_to("chat.postMessage")
                    if call.ok and "Submitted" in str(call.params.get("text"))
                ]

            await wait_for(told, 20, "alice to be told")
            await asyncio.sleep(2)
            assert len(told()) == 1, told()
            assert f"Slurm job *{recorded}*" in told()[0]
        finally:
            for bot in (first, second):
                if bot is not None and bot.poll() is None:
                    bot.terminate()
                    bot.wait(timeout=20)
            script.unlink(missing_ok=True)
            log.close()
            print((tmp_path / "bot.log").read_text(errors="replace")[-3000:])
    print(f"{how}: job {recorded} only; the wrapper's log: {slow_sbatch.read_text().split()}")


async def test_a_runner_killed_mid_sbatch_holds_the_tag_until_sbatch_is_done(
    clean_queue: None, slow_sbatch: Path
) -> None:
    """Only the runner is SIGKILLed while its sbatch works: sbatch inherited the locked record,
    so the tag stays "running" until sbatch is through, and then its job is found by the tag
    although no runner wrote the answer down."""
    script = ALICE_DIR / "orphan.sh"
    script.write_text("#!/bin/bash\n#SBATCH --partition=debug\n#SBATCH -o /dev/null\nsleep 99\n")
    shutil.chown(script, "alice", "alice")
    tag, since = os.urandom(8).hex(), time.time()
    request = submit_request(
        script=str(script), options={}, roots=[str(ALICE_DIR.parent)], partitions=["debug"], tag=tag
    )
    runner = subprocess.Popen(
        [*AS_SKYBOT, "/usr/bin/sudo", "-n", "-u", "alice", "--", DEFAULT_RUNNER],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    try:
        assert runner.stdin is not None
        runner.stdin.write(json.dumps({**request, "bot_version": __version__}).encode())
        runner.stdin.close()
        await wait_for(lambda: "start" in slow_sbatch.read_text(), 20, "the slow sbatch")
        (python,) = [
            pid
            for pid in _descendants(runner.pid)
            # The interpreter running the runner, not sudo or runuser naming it.
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:3]
            in ([b"/usr/bin/python3", b"-IS", DEFAULT_RUNNER.encode()],)
        ]
        os.kill(python, signal.SIGKILL)
        runner.wait(timeout=10)
        status = await call_runner("alice", submit_status_request(tag, since), prefix=AS_SKYBOT)
        assert status == {"ok": True, "state": "running"}
        assert "exec" not in slow_sbatch.read_text()
        release(slow_sbatch)
        await wait_for(lambda: _tagged_jobs(f"skybot:{tag}"), SLEEP + 20, "sbatch's job")
        status = await call_runner("alice", submit_status_request(tag, since), prefix=AS_SKYBOT)
        assert status["state"] == "submitted"
        assert [status["job_id"]] == _tagged_jobs(f"skybot:{tag}")
    finally:
        if runner.poll() is None:
            runner.kill()
        script.unlink(missing_ok=True)
