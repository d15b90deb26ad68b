"""skybot-runner end to end: real sudo, real users, the real Slurm test cluster.

The test process is root; every request is made the way the bot makes it, as the `skybot`
service user (`runuser -u skybot -- sudo -n -u USER -- /usr/local/libexec/skybot-runner`), by
bot.runner_client.call_runner. A session fixture installs the runner and the sudoers rule from
this checkout with deploy/install-runner.sh (`skybot install runner sudoers`, idempotent).

"Nothing was submitted" is checked by name: every script a refusal test uses names its job with
a fresh token (#SBATCH --job-name, or the job_name option), and afterwards neither squeue (which
keeps finished jobs for MinJobAge=10 s) nor sacct knows a job of that name.
"""

from __future__ import annotations

import contextlib
import grp
import json
import os
import pwd
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot import __version__
from bot.runner_client import call_runner
from tests.support.cluster import wait_until
from tests.support.installed_runner import (
    AS_SKYBOT,
    HOFFMAN,
    REPO,
    RUNNER_TOML,
    alice_dir,
    ask,
    bob_dir,
    installed_runner,
    make_dir,
    put,
    sh,
    token,
)

__all__ = ["alice_dir", "bob_dir", "installed_runner", "token"]  # fixtures, used by name

pytestmark = pytest.mark.cluster

RUNNER = "/usr/local/libexec/skybot-runner"
SUDOERS = Path("/etc/sudoers.d/skybot")
SUDO = "/usr/bin/sudo"
KIRA = Path("/srv/kira-lab/share4")
ROOTS = [str(HOFFMAN), str(KIRA)]
PARTITIONS = ["hoffman-lab", "kira-lab", "debug", "overcap"]
ALICE_OPTS = {"partition": "debug", "account": "hoffman-lab", "time": "2"}


def test_install_is_idempotent_and_root_owned() -> None:
    result = sh(str(REPO / "deploy" / "install-runner.sh"))
    assert result.returncode == 0, result.stderr
    assert "installed" not in result.stdout  # nothing changed the second time
    st = os.stat(RUNNER)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (0, 0, 0o755)
    st = SUDOERS.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (0, 0, 0o440)
    assert SUDOERS.read_text() == (REPO / "bot" / "install_files" / "skybot.sudoers").read_text()
    first = Path(RUNNER).read_text().splitlines()[0]
    assert first == "#!/usr/bin/python3 -IS"
    assert sh("visudo", "-cf", str(SUDOERS)).returncode == 0
    # The installing skybot's version is written into the runner, which reports it to anyone.
    assert f'\nVERSION = "{__version__}"\n' in Path(RUNNER).read_text()
    answer = sh(*AS_SKYBOT, RUNNER, input='{"action": "version"}')
    assert json.loads(answer.stdout) == {"ok": True, "version": __version__}


async def test_a_runner_of_another_version_refuses_before_acting() -> None:
    """A bot of another version is refused by the runner before it looks at the request; the
    bot turns that into one sentence naming both versions and the fix."""
    request = {"action": "cancel", "job_id": "1", "bot_version": "0.0.1"}
    result = sh("/usr/sbin/runuser", "-u", "alice", "--", RUNNER, input=json.dumps(request))
    assert json.loads(result.stdout) == {
        "ok": False,
        "error": f"skybot 0.0.1 cannot use skybot-runner {__version__}: an admin must run "
        "`skybot install runner` as root with the skybot that runs the bot.",
        "runner_version": __version__,
    }
    # What the bot sends carries its own version, so the real runner serves it.
    assert (await ask("alice", {"action": "verify-link", "code": "nope1"}))["ok"] is False
    assert "cannot use skybot-runner" not in str(
        await ask("alice", {"action": "cancel", "job_id": "1"})
    )


# ----------------------------------------------------------------------------------------------
# Helpers


def submit(script: str, options: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "action": "submit",
        "script": script,
        "options": options or {},
        "roots": ROOTS,
        "partitions": PARTITIONS,
        **extra,
    }


def script(token: str, body: str = "true", *directives: str) -> str:
    header = "".join(f"#SBATCH {d}\n" for d in (f"--job-name={token}", "--time=2", *directives))
    return f"#!/bin/bash\n{header}{body}\n"


def jobs_named(name: str) -> list[str]:
    queued = sh("squeue", "-h", "-a", "-n", name, "-o", "%i").stdout.split()
    accounted = sh(
        "sacct", "-n", "-X", "-a", "-P", "-S", "now-1hour", "--name", name, "-o", "jobid"
    ).stdout.split()
    return sorted(set(queued) | set(accounted))


def job_state(job_id: int | str) -> str:
    line = sh("squeue", "-h", "-j", str(job_id), "-o", "%T").stdout.strip()
    if line:
        return line
    return sh("sacct", "-n", "-X", "-P", "-j", str(job_id), "-o", "state").stdout.strip()


@pytest.fixture
def cancel_afterwards() -> Iterator[list[int]]:
    job_ids: list[int] = []
    yield job_ids
    for job_id in job_ids:
        sh("scancel", str(job_id))


# ----------------------------------------------------------------------------------------------
# Submitting as the user


async def test_alice_submits_and_the_job_runs_as_alice(alice_dir: Path, token: str) -> None:
    put(alice_dir / "job.sh", script(token, "whoami > out.txt\npwd >> out.txt"), "alice")
    reply = await ask("alice", submit(str(alice_dir / "job.sh"), ALICE_OPTS))
    assert reply["ok"] is True, reply
    assert isinstance(reply["job_id"], int)
    assert reply["cluster"] == "skynet"
    assert reply["script"] == str(alice_dir / "job.sh")
    assert jobs_named(token) == [str(reply["job_id"])]

    out = alice_dir / "out.txt"
    what = f"job {reply['job_id']} to write two lines to {out}"
    wait_until(lambda: out.exists() and out.read_text().count("\n") >= 2, 60, what)
    assert out.stat().st_uid == pwd.getpwnam("alice").pw_uid
    # It ran as alice, in the script's directory.
    assert out.read_text().splitlines() == ["alice", str(alice_dir)]
    user = sh("sacct", "-n", "-X", "-P", "-j", str(reply["job_id"]), "-o", "user").stdout
    assert user.strip() == "alice"


async def test_relative_and_tilde_paths_resolve_to_the_users_own_dirs(
    alice_dir: Path, token: str, cancel_afterwards: list[int]
) -> None:
    put(alice_dir / "rel.sh", script(token), "alice")
    # Relative names are tried in the home directory, then in <root>/alice.
    reply = await ask("alice", submit(f"{token}/rel.sh", ALICE_OPTS))
    assert reply["ok"] is True, reply
    cancel_afterwards.append(reply["job_id"])
    assert reply["script"] == str(alice_dir / "rel.sh")

    home = Path(pwd.getpwnam("alice").pw_dir)
    # --output=/dev/null: the job must leave nothing behind in alice's home.
    home_script = put(home / f"{token}.sh", script(token, "true", "--output=/dev/null"), "alice")
    try:
        reply = await ask("alice", submit(f"~/{token}.sh", ALICE_OPTS))
        assert reply["ok"] is True, reply
        cancel_afterwards.append(reply["job_id"])
        assert reply["script"] == str(home_script)
    finally:
        home_script.unlink()


async def test_the_bots_environment_does_not_reach_the_job(alice_dir: Path, token: str) -> None:
    put(alice_dir / "env.sh", script(token, "env > env.txt"), "alice")
    request = json.dumps(submit(str(alice_dir / "env.sh"), ALICE_OPTS))
    bot_env = {
        "PATH": "/usr/bin:/bin",
        "SLACK_BOT_TOKEN": "xoxb-leaked-secret",
        "PYTHONPATH": "/tmp/evil",
        "SBATCH_EXPORT": "ALL",
        "LD_PRELOAD": "/tmp/x.so",
    }
    result = sh(*AS_SKYBOT, SUDO, "-n", "-u", "alice", "--", RUNNER, input=request, env=bot_env)
    reply = json.loads(result.stdout)
    assert reply["ok"] is True, reply
    env_txt = alice_dir / "env.txt"
    wait_until(lambda: env_txt.exists() and "USER=" in env_txt.read_text(), 60, "env.txt")
    job_env = env_txt.read_text()
    assert "xoxb-leaked-secret" not in job_env
    assert "/tmp/evil" not in job_env
    assert "SUDO_" not in job_env
    assert "USER=alice" in job_env.splitlines()
    # --export=NONE: the job starts from alice's login environment, not the submitter's.
    assert "SLURM_EXPORT_ENV=NONE" in job_env.splitlines()
    assert f"SLURM_SUBMIT_DIR={alice_dir}" in job_env.splitlines()


# ----------------------------------------------------------------------------------------------
# Cancelling


async def test_only_the_owner_can_cancel(
    alice_dir: Path, token: str, cancel_afterwards: list[int]
) -> None:
    put(alice_dir / "sleep.sh", script(token, "sleep 300"), "alice")
    reply = await ask("alice", submit(str(alice_dir / "sleep.sh"), ALICE_OPTS))
    assert reply["ok"] is True, reply
    job_id = reply["job_id"]
    cancel_afterwards.append(job_id)
    wait_until(lambda: job_state(job_id) in ("RUNNING", "PENDING"), 20, f"job {job_id} queued")

    refused = await ask("bob", {"action": "cancel", "job_id": str(job_id)})
    assert refused["ok"] is False
    assert "permission denied" in refused["error"].lower()
    assert job_state(job_id) in ("RUNNING", "PENDING")

    done = await ask("alice", {"action": "cancel", "job_id": str(job_id)})
    assert done == {"ok": True, "job_id": str(job_id)}
    wait_until(lambda: job_state(job_id).startswith("CANCELLED"), 30, f"job {job_id} cancelled")

    again = await ask("alice", {"action": "cancel", "job_id": str(job_id)})
    assert again["ok"] is False
    assert "completed" in again["error"]


async def test_cancel_reports_unknown_jobs_and_refuses_bad_ids() -> None:
    reply = await ask("alice", {"action": "cancel", "job_id": "987654321"})
    assert reply["ok"] is False
    assert "Invalid job id" in reply["error"]
    for bad in ("12;id", "-1", "1 2", "all", "", "12\n", "--user=bob"):
        reply = await ask("alice", {"action": "cancel", "job_id": bad})
        assert reply["ok"] is False, bad
        assert "job_id must be a job number" in reply["error"]


# ----------------------------------------------------------------------------------------------
# Moving a pending job to overcap


def squeue_row(job_id: int) -> str:
    return sh("squeue", "-h", "-j", str(job_id), "-o", "%i|%u|%T|%P|%a").stdout.strip()


def move(job_id: int | str, **fields: Any) -> dict[str, Any]:
    return {
        "action": "move-to-overcap",
        "job_id": str(job_id),
        "partition": "overcap",
        "account": "overcap",
        **fields,
    }


async def test_only_the_owners_pending_job_moves_to_overcap(
    cancel_afterwards: list[int],
) -> None:
    def alice_sbatch(*args: str) -> int:
        result = sh(
            "/usr/sbin/runuser",
            "-u",
            "alice",
            "--",
            "sbatch",
            "--parsable",
            "--chdir=/tmp",
            "-o",
            "/dev/null",
            "-A",
            "hoffman-lab",
            *args,
        )
        assert result.returncode == 0, result.stderr
        cancel_afterwards.append(int(result.stdout.split(";")[0]))
        return cancel_afterwards[-1]

    # Held: it stays pending whatever the partition, so each refusal can be seen to change nothing.
    held = alice_sbatch("-p", "hoffman-lab", "--hold", "--wrap", "sleep 300")
    before = f"{held}|alice|PENDING|hoffman-lab|hoffman-lab"
    assert squeue_row(held) == before

    refused = await ask("bob", move(held))
    assert refused == {
        "ok": False,
        "error": f"Job {held} belongs to alice, not to bob; skybot moves only your own jobs.",
    }
    refused = await ask("alice", move(held, qos="high"))
    assert refused == {
        "ok": False,
        "error": "The move-to-overcap request has unexpected field(s): qos.",
    }
    refused = await ask("alice", move(f"{held}_1"))
    assert refused["error"] == "job_id must be a plain job number like 123 (not an array task)."
    assert squeue_row(held) == before

    array = alice_sbatch("-p", "hoffman-lab", "--hold", "--array=1-3", "--wrap", "true")
    assert (await ask("alice", move(array)))["error"] == (
        f"Job {array} is a job array or a heterogeneous job; skybot moves single jobs only."
    )
    running = alice_sbatch("-p", "debug", "--wrap", "sleep 300")
    wait_until(lambda: job_state(running) == "RUNNING", 30, f"job {running} to run")
    assert await ask("alice", move(running)) == {
        "ok": False,
        "error": f"Job {running} is running, not pending: only a job that has not started can "
        "move to overcap.",
    }
    assert (await ask("alice", move(987654321)))["error"] == (
        "Job 987654321 is not in the queue (it ended, or never existed)."
    )

    # Alice's own pending job moves, as alice, keeping its id.
    moved = await ask("alice", move(held))
    assert moved == {"ok": True, "job_id": str(held), "partition": "overcap", "account": "overcap"}
    assert squeue_row(held) == f"{held}|alice|PENDING|overcap|overcap"
    assert (await ask("alice", move(held)))["error"] == (
        f"Job {held} is already in the overcap partition."
    )


# ----------------------------------------------------------------------------------------------
# Refused scripts: a clear message, and nothing submitted


async def refused(user: str, request: dict[str, Any], token: str, *fragments: str) -> str:
    reply = await ask(user, request)
    assert reply["ok"] is False, reply
    for fragment in fragments:
        assert fragment in reply["error"], reply["error"]
    assert jobs_named(token) == []
    return reply["error"]


async def test_paths_outside_the_roots_are_refused(token: str) -> None:
    options = {**ALICE_OPTS, "job_name": token}
    await refused("alice", submit("/etc/passwd", options), token, "/etc/passwd", "outside")
    outside = put(Path(f"/tmp/{token}.sh"), script(token), "alice")
    try:
        await refused("alice", submit(str(outside), options), token, str(outside), "outside")
    finally:
        outside.unlink()
    await refused("alice", submit(f"/tmp/{token}-missing.sh", options), token, "outside")
    # A bot that names "/" as a storage root gains nothing: "/" never counts as a root.
    await refused("alice", {**submit("/etc/passwd", options), "roots": ["/"]}, token, "outside")
    await refused(
        "alice", {**submit("/etc/passwd", options), "roots": ["/etc"]}, token, "belongs to root"
    )


async def test_dotdot_escapes_are_refused(alice_dir: Path, bob_dir: Path, token: str) -> None:
    put(bob_dir / "job.sh", script(token), "bob")
    put(alice_dir / "job.sh", script(token), "alice")
    for path in (
        f"../bob/{token}/job.sh",
        f"{alice_dir}/../../bob/{token}/job.sh",
        f"{alice_dir}/../{token}/job.sh",
        "~/../bob/job.sh",
    ):
        await refused("alice", submit(path, ALICE_OPTS), token, "'..'")


async def test_symlinks_to_other_files_are_refused(
    alice_dir: Path, bob_dir: Path, token: str
) -> None:
    put(bob_dir / "job.sh", script(token), "bob")
    link = alice_dir / "link.sh"
    link.symlink_to(bob_dir / "job.sh")
    os.lchown(link, pwd.getpwnam("alice").pw_uid, -1)
    await refused("alice", submit(str(link), ALICE_OPTS), token, "symbolic link")
    # Even a symlink to her own file: the last component is never followed.
    put(alice_dir / "own.sh", script(token), "alice")
    (alice_dir / "own-link.sh").symlink_to(alice_dir / "own.sh")
    await refused(
        "alice", submit(str(alice_dir / "own-link.sh"), ALICE_OPTS), token, "symbolic link"
    )
    # A symlinked directory is resolved, and then the file's owner decides.
    (alice_dir / "bobs").symlink_to(bob_dir)
    await refused(
        "alice", submit(str(alice_dir / "bobs" / "job.sh"), ALICE_OPTS), token, "belongs to bob"
    )
    # A symlinked directory leading out of the roots is outside.
    (alice_dir / "etc").symlink_to("/etc")
    await refused(
        "alice",
        submit(str(alice_dir / "etc" / "passwd"), {**ALICE_OPTS, "job_name": token}),
        token,
        "outside",
    )


async def test_other_users_files_are_refused(alice_dir: Path, bob_dir: Path, token: str) -> None:
    bobs = put(bob_dir / "job.sh", script(token), "bob")
    await refused("alice", submit(str(bobs), ALICE_OPTS), token, "belongs to bob, not to alice")
    # ...even when planted in alice's own directory.
    planted = put(alice_dir / "planted.sh", script(token), "bob")
    await refused("alice", submit(str(planted), ALICE_OPTS), token, "belongs to bob")
    # And a file alice owns but cannot read is reported as such.
    unreadable = put(alice_dir / "secret.sh", script(token), "alice", mode=0o000)
    await refused("alice", submit(str(unreadable), ALICE_OPTS), token, "cannot read")


async def test_directories_and_missing_files_are_refused(alice_dir: Path, token: str) -> None:
    options = {**ALICE_OPTS, "job_name": token}
    await refused("alice", submit(str(alice_dir), options), token, "is a directory")
    await refused("alice", submit(str(alice_dir) + "/", options), token, "is a directory")
    await refused(
        "alice",
        submit(str(alice_dir / "nope.sh"), options),
        token,
        f"There is no file {alice_dir}/nope.sh",
    )
    await refused(
        "alice",
        submit("nope-at-all.sh", options),
        token,
        "could not find",
        "/home/alice/nope-at-all.sh",
        f"{HOFFMAN}/alice/nope-at-all.sh",
    )
    os.mkfifo(alice_dir / "fifo.sh")
    os.chown(alice_dir / "fifo.sh", pwd.getpwnam("alice").pw_uid, -1)
    await refused("alice", submit(str(alice_dir / "fifo.sh"), options), token, "not a regular file")


async def test_oversized_scripts_are_refused(alice_dir: Path, token: str) -> None:
    body = script(token) + "# padding\n" * 500  # about 5.5 kB
    path = put(alice_dir / "big.sh", body, "alice")
    await refused(
        "alice", submit(str(path), ALICE_OPTS, max_script_bytes=4096), token, "bytes", "4096"
    )
    # Over the default cap (1 MiB) when the request names none.
    huge = put(alice_dir / "huge.sh", script(token) + "#" * (1024 * 1024 + 10), "alice")
    await refused("alice", submit(str(huge), ALICE_OPTS), token, "1048576")


# ----------------------------------------------------------------------------------------------
# Refused options


@pytest.mark.parametrize("name", ["uid", "wrap", "output", "export", "chdir", "--uid", "gpus "])
async def test_options_off_the_allowlist_are_refused(
    name: str, alice_dir: Path, token: str
) -> None:
    put(alice_dir / "job.sh", script(token), "alice")
    await refused(
        "alice",
        submit(str(alice_dir / "job.sh"), {**ALICE_OPTS, name: "0"}),
        token,
        f"'{name}' is not allowed",
    )


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("job_name", "x;rm -rf ~", "';'"),
        ("job_name", "x\n#SBATCH --uid=0", "a newline"),
        ("time", "1\n--uid=0", "a newline"),
        ("account", "$(id)", "'$'"),
        ("partition", "debug`id`", "'`'"),
        ("qos", "normal|id", "'|'"),
        ("dependency", "afterok:1&&id", "'&'"),
        ("gpus", "1 --uid=0", "a space"),
        ("gpus", "a40:1\r", "a carriage return"),
        ("time", "1\x00", "control character"),
        ("job_name", "--uid=0", "not a job name"),
        ("time", "tomorrow", "not a Slurm time"),
        ("gpus", "0", "not a GPU count"),
        ("dependency", "after:1:x", "not a dependency"),
        ("partition", "secret-lab", "'secret-lab', which is not a partition skybot submits to"),
        ("job_name", 5, "must be a string"),
    ],
)
async def test_bad_option_values_are_refused(
    name: str, value: Any, says: str, alice_dir: Path, token: str
) -> None:
    put(alice_dir / "job.sh", script(token), "alice")
    error = await refused(
        "alice",
        submit(str(alice_dir / "job.sh"), {**ALICE_OPTS, name: value}),
        token,
        f"'{name}'",
        says,
    )
    assert "\n" not in error
    if name == "job_name" and isinstance(value, str):
        assert jobs_named(value) == []  # the option would have renamed the job


async def test_allowed_options_reach_sbatch(
    alice_dir: Path, token: str, cancel_afterwards: list[int]
) -> None:
    put(alice_dir / "job.sh", script(token, "sleep 60"), "alice")
    first = await ask("alice", submit(str(alice_dir / "job.sh"), {**ALICE_OPTS, "time": "3"}))
    assert first["ok"] is True, first
    cancel_afterwards.append(first["job_id"])
    options = {
        "partition": "hoffman-lab",
        "account": "hoffman-lab",
        "gpus": "a40:1",
        "time": "0-00:05:00",
        "job_name": f"{token}-2",
        "dependency": f"afterok:{first['job_id']}",
    }
    second = await ask("alice", submit(str(alice_dir / "job.sh"), options))
    assert second["ok"] is True, second
    cancel_afterwards.append(second["job_id"])
    fields = (
        sh("squeue", "-h", "-j", str(second["job_id"]), "-o", "%j|%P|%a|%l|%E|%b")
        .stdout.strip()
        .split("|")
    )
    assert fields[:5] == [
        f"{token}-2",
        "hoffman-lab",
        "hoffman-lab",
        "5:00",
        f"afterok:{first['job_id']}(unfulfilled)",
    ]
    assert "a40:1" in fields[5]


async def test_sbatch_errors_come_back_verbatim(
    alice_dir: Path, token: str, cancel_afterwards: list[int]
) -> None:
    # kira-lab is an account alice does not belong to: Slurm refuses at submission.
    put(alice_dir / "job.sh", script(token), "alice")
    reply = await ask(
        "alice", submit(str(alice_dir / "job.sh"), {"partition": "debug", "account": "kira-lab"})
    )
    cancel_afterwards.extend([reply["job_id"]] if "job_id" in reply else [])
    assert reply["ok"] is False
    assert reply["error"].startswith("sbatch: error: Batch job submission failed: Invalid account")
    put(alice_dir / "noshebang.sh", f"#SBATCH --job-name={token}\ntrue\n", "alice")
    reply = await ask("alice", submit(str(alice_dir / "noshebang.sh"), ALICE_OPTS))
    cancel_afterwards.extend([reply["job_id"]] if "job_id" in reply else [])
    assert reply["ok"] is False
    assert reply["error"].startswith("sbatch: error: This does not look like a batch script")
    assert jobs_named(token) == []


async def test_runner_toml_overrides_the_request(alice_dir: Path, token: str) -> None:
    put(alice_dir / "job.sh", script(token), "alice")
    made_dir = not RUNNER_TOML.parent.exists()
    RUNNER_TOML.parent.mkdir(mode=0o755, exist_ok=True)
    try:
        RUNNER_TOML.write_text('partitions = ["overcap"]\nroots = ["/srv/kira-lab/share4"]\n')
        RUNNER_TOML.chmod(0o644)
        # The bot asks for debug and the hoffman root; the site allows neither.
        await refused(
            "alice",
            submit(str(alice_dir / "job.sh"), ALICE_OPTS),
            token,
            "'debug', which is not a partition skybot submits to (allowed: overcap)",
        )
        await refused(
            "alice", submit(str(alice_dir / "job.sh"), {"partition": "overcap"}), token, "outside"
        )
        # A runner.toml with a nonsense value, or one others could write: the runner stops.
        RUNNER_TOML.write_text("min_uid = 0\n")
        reply = await ask("alice", submit(str(alice_dir / "job.sh"), ALICE_OPTS))
        assert reply == {
            "ok": False,
            "error": "skybot-runner is misconfigured: /etc/skybot/runner.toml: min_uid = 0 "
            "is not valid.",
        }
        RUNNER_TOML.chmod(0o666)
        reply = await ask("alice", submit(str(alice_dir / "job.sh"), ALICE_OPTS))
        assert reply["ok"] is False
        assert "misconfigured" in reply["error"] and "runner.toml" in reply["error"]
        assert jobs_named(token) == []
    finally:
        RUNNER_TOML.unlink(missing_ok=True)
        if made_dir:
            RUNNER_TOML.parent.rmdir()


async def test_malformed_requests_are_refused() -> None:
    for request, says in [
        ({"action": "rm -rf"}, "Unknown action"),
        ({}, "Unknown action"),
        ({"action": "submit", "script": "/x", "command": "id"}, "unexpected field(s): command"),
        ({"action": "cancel", "job_id": "1", "user": "bob"}, "unexpected field(s): user"),
        ({"action": "submit", "script": ["/x"]}, "Say which batch script"),
        ({"action": "submit", "script": "/x", "options": ["--uid=0"]}, "'options' must be"),
    ]:
        reply = await ask("alice", request)
        assert reply["ok"] is False, request
        assert says in reply["error"], (request, reply)
    for raw in ("not json", "[1, 2]", ""):
        result = sh(*AS_SKYBOT, SUDO, "-n", "-u", "alice", "--", RUNNER, input=raw)
        assert result.returncode == 0
        assert json.loads(result.stdout)["ok"] is False
        assert "Traceback" not in result.stdout + result.stderr


def raw_request(raw: str | bytes) -> subprocess.CompletedProcess[bytes]:
    data = raw.encode() if isinstance(raw, str) else raw
    return subprocess.run(
        [*AS_SKYBOT, SUDO, "-n", "-u", "alice", "--", RUNNER],
        input=data,
        capture_output=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("[" * 30_000 + "]" * 30_000, "nests deeper than 8 levels"),
        ('{"action": "cancel", "job_id": ' + "[" * 30_000 + "]" * 30_000 + "}", "nests deeper"),
        (
            '{"action": "cancel", "job_id": "[[[[[[[[[[[[[[[[[[[[[[["}',
            "job_id must be a job number",
        ),
        ('{"action": "submit", "script": "/x", "pad": "' + "x" * 70_000 + '"}', "too large"),
        (b'{"action": "cancel", "job_id": "\xff"}', "not valid UTF-8"),
        ('{"action": "cancel", "job_id": NaN}', "NaN is not a JSON number"),
        ('{"action": "cancel", "action": "submit", "job_id": "1"}', "'action' more than once"),
        (
            '{"action": "submit", "script": "/x", '
            '"options": {"partition": "overcap", "partition": "hoffman-lab"}}',
            "'partition' more than once",
        ),
    ],
    ids=["deep", "deep-inside", "brackets-in-a-string", "large", "utf-8", "nan", "dup", "dup-opt"],
)
def test_deep_large_and_ambiguous_requests_get_the_normal_refusal(
    raw: str | bytes, says: str
) -> None:
    """Issue 13 item 9: a 30,000-deep request was a RecursionError and exit 1."""
    result = raw_request(raw)
    assert result.returncode == 0, result.stderr
    reply = json.loads(result.stdout)
    assert reply["ok"] is False and says in reply["error"], reply
    assert b"Traceback" not in result.stdout + result.stderr


# ----------------------------------------------------------------------------------------------
# verify-link


@contextlib.contextmanager
def alice_link_dir() -> Iterator[Path]:
    """~alice/.config/skybot, emptied for the test and restored afterwards."""
    home = Path(pwd.getpwnam("alice").pw_dir)
    config = home / ".config"
    made_config = not config.exists()
    if made_config:
        make_dir(config, "alice")
    target = config / "skybot"
    saved = None
    if target.exists() or target.is_symlink():
        saved = config / f"skybot.saved-{uuid.uuid4().hex[:8]}"
        target.rename(saved)
    try:
        yield target
    finally:
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.exists():
            shutil.rmtree(target)
        if saved is not None:
            saved.rename(target)
        if made_config:
            shutil.rmtree(config, ignore_errors=True)


async def test_verify_link(bob_dir: Path) -> None:
    with alice_link_dir() as link_dir:
        reply = await ask("alice", {"action": "verify-link", "code": "ABC123"})
        assert reply["ok"] is False and "There is no ~/.config/skybot/link" in reply["error"]

        make_dir(link_dir, "alice", 0o700)
        put(link_dir / "link", "ABC123\n", "alice", 0o600)
        assert await ask("alice", {"action": "verify-link", "code": "ABC123"}) == {
            "ok": True,
            "user": "alice",
        }
        reply = await ask("alice", {"action": "verify-link", "code": "ABC124"})
        assert reply["ok"] is False and "does not match" in reply["error"]
        reply = await ask("alice", {"action": "verify-link", "code": "ABC 123;id"})
        assert reply["ok"] is False and "link code must be" in reply["error"]
        # The right code, but the wrong person asking: bob has no such file.
        reply = await ask("bob", {"action": "verify-link", "code": "ABC123"})
        assert reply["ok"] is False

        # bob's code, readable by alice, linked into alice's config: refused.
        bobs = put(bob_dir / "link", "BOBCODE\n", "bob", 0o644)
        (link_dir / "link").unlink()
        (link_dir / "link").symlink_to(bobs)
        reply = await ask("alice", {"action": "verify-link", "code": "BOBCODE"})
        assert reply["ok"] is False and "symbolic link" in reply["error"]
        # A file of bob's placed in alice's directory (as only root could): refused.
        (link_dir / "link").unlink()
        put(link_dir / "link", "BOBCODE\n", "bob", 0o644)
        reply = await ask("alice", {"action": "verify-link", "code": "BOBCODE"})
        assert reply["ok"] is False and "link belongs to bob, not alice" in reply["error"]
        # Alice's own file, but others could have written it.
        put(link_dir / "link", "ABC123\n", "alice", 0o666)
        reply = await ask("alice", {"action": "verify-link", "code": "ABC123"})
        assert reply["ok"] is False and "others could have written it" in reply["error"]
        put(link_dir / "link", "ABC123\n", "alice", 0o644)
        link_dir.chmod(0o777)
        reply = await ask("alice", {"action": "verify-link", "code": "ABC123"})
        assert reply["ok"] is False and "others could have written it" in reply["error"]
        # umask 002 with alice's private group is fine; group-writable by a shared group is not.
        link_dir.chmod(0o775)
        (link_dir / "link").chmod(0o664)
        assert (await ask("alice", {"action": "verify-link", "code": "ABC123"}))["ok"] is True
        os.chown(link_dir / "link", -1, grp.getgrnam("skybot-users").gr_gid)
        reply = await ask("alice", {"action": "verify-link", "code": "ABC123"})
        assert reply["ok"] is False and "others could have written it" in reply["error"]
        (link_dir / "link").chmod(0o644)
        link_dir.chmod(0o700)
        assert (await ask("alice", {"action": "verify-link", "code": "ABC123"}))["ok"] is True

        # The whole ~/.config/skybot directory as a symlink to bob's: refused.
        shutil.rmtree(link_dir)
        link_dir.symlink_to(bob_dir)
        reply = await ask("alice", {"action": "verify-link", "code": "BOBCODE"})
        assert reply["ok"] is False and "symbolic link" in reply["error"]


# ----------------------------------------------------------------------------------------------
# What sudo allows the service user, and whom the runner serves


def test_sudo_lists_only_the_runner() -> None:
    listing = sh("sudo", "-l", "-U", "skybot").stdout
    commands = listing.split("may run the following commands", 1)[1].splitlines()[1:]
    commands = [line.strip() for line in commands if line.strip()]
    assert commands == [f'(%skybot-users) NOPASSWD: {RUNNER} ""']


@pytest.mark.parametrize(
    "argv",
    [
        ["-u", "alice", "/bin/sh", "-c", "id"],
        ["-u", "alice", "--", RUNNER, "--help"],
        ["-u", "alice", "--", RUNNER, ""],
        ["-u", "root", "--", RUNNER],
        ["--", RUNNER],
        ["-u", "#-1", "--", RUNNER],
        ["-u", "#4294967295", "--", RUNNER],
        ["-u", "skybot", "--", RUNNER],
        ["-u", "alice", "-g", "root", "--", RUNNER],
        ["-u", "alice", "-E", "--", RUNNER],
        ["-u", "alice", "-i"],
        ["-u", "alice", "--preserve-env=PYTHONPATH", "--", RUNNER],
    ],
)
def test_sudo_refuses_everything_else(argv: list[str]) -> None:
    # With something to preserve: sudo ignores -E/--preserve-env when the variable is unset.
    env = {**os.environ, "PYTHONPATH": "/tmp/evil"}
    result = sh(*AS_SKYBOT, SUDO, "-n", *argv, input="{}", env=env)
    # The runner always prints JSON, so empty stdout means sudo refused before running anything.
    assert result.returncode != 0, result.stdout
    assert result.stdout == ""
    assert result.stderr.startswith("sudo:") or "not allowed" in result.stderr, result.stderr


def test_the_runner_itself_refuses_non_members_root_and_arguments() -> None:
    request = '{"action": "verify-link", "code": "ABC123"}'
    # skybot is a normal account but not in skybot-users.
    result = sh(*AS_SKYBOT, RUNNER, input=request)
    assert result.returncode == 0
    assert json.loads(result.stdout) == {
        "ok": False,
        "error": "skybot is not in the skybot-users group, so skybot may not act for this account.",
    }
    result = sh(RUNNER, input=request)
    assert (
        json.loads(result.stdout)["error"] == "skybot does not act as root: it is a system account."
    )
    for system_user in ("daemon", "nobody"):
        result = sh("/usr/sbin/runuser", "-u", system_user, "--", RUNNER, input=request)
        assert json.loads(result.stdout) == {
            "ok": False,
            "error": f"skybot does not act as {system_user}: it is a system account.",
        }
    result = sh("/usr/sbin/runuser", "-u", "alice", "--", RUNNER, "extra", input=request)
    assert result.returncode == 2
    assert "takes no arguments" in json.loads(result.stdout)["error"]


async def test_client_refuses_bad_user_names_and_explains_sudo_failures() -> None:
    for user in ("root", "alice;id", "-u", "ALICE", "", "a" * 40, "../bob"):
        reply = await ask(user, {"action": "verify-link", "code": "ABC123"})
        assert reply["ok"] is False, user
        assert "never acts as root" in reply["error"] or "not a valid" in reply["error"]
    reply = await ask("nosuchuser", {"action": "verify-link", "code": "ABC123"})
    assert reply == {"ok": False, "error": "There is no user nosuchuser on this cluster."}
    reply = await ask("skybot", {"action": "verify-link", "code": "ABC123"})
    assert reply["ok"] is False
    assert reply["error"].startswith("skybot is not allowed to act as skybot")
    reply = await call_runner(
        "alice",
        {"action": "cancel", "job_id": "1"},
        prefix=AS_SKYBOT,
        runner="/usr/local/libexec/not-the-runner",
    )
    assert reply["ok"] is False and "not allowed to act as alice" in reply["error"]
