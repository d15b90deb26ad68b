"""The bot's side of skybot-runner: every action taken as a cluster user goes through here.

`call_runner` runs `sudo -n -u USER -- /usr/local/libexec/skybot-runner` (an argument list,
never a shell), writes the JSON request to its stdin and returns the runner's JSON reply. It
always returns a dict with a boolean "ok"; when sudo itself refuses (the user is not in
skybot-users, the sudoers rule is missing) the "error" says so in a sentence, not sudo's words.

The runner decides what is allowed; this module only refuses what can never be right (a
malformed user name, root) before spending a process on it.

Every request carries the bot's version, and a runner installed by another skybot version
refuses it before acting; a runner older than that check refuses the unknown field. Either
way the answer becomes one sentence naming both versions and the fix, logged as an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Sequence
from typing import Any

from bot import __version__
from core.runner_contract import RunnerReply, RunnerRequest, is_reply
from core.runner_replies import NO_REASON
from core.user_names import is_cluster_user_name

log = logging.getLogger(__name__)

DEFAULT_SUDO = "/usr/bin/sudo"
DEFAULT_RUNNER = "/usr/local/libexec/skybot-runner"
MAX_REPLY_BYTES = 1024 * 1024
# sudo's own environment: nothing of the bot's (tokens, PYTHONPATH, ...) is handed on, even
# though sudo's env_reset would drop it anyway.
SUDO_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def _error(message: str) -> dict[str, Any]:
    return {"ok": False, "error": message}


def version_mismatch(reply: dict[str, Any], runner: str) -> str | None:
    """The admin-facing sentence when `reply` says the runner is another version, else None."""
    if reply.get("ok") is not False:
        return None
    found = reply.get("runner_version")
    if found is None and "unexpected field(s): bot_version" in str(reply.get("error")):
        found = "older than 0.1.0"
    if found is None or found == __version__:
        return None
    return (
        f"skybot cannot act as you right now: its runner ({runner}) is version {found} but "
        f"the bot is {__version__}. An admin must run `skybot install runner` as root."
    )


def _explain_sudo_failure(user: str, stderr: str, runner: str) -> str:
    text = stderr.strip()
    lowered = text.lower()
    if "password is required" in lowered or "not allowed to" in lowered:
        return (
            f"skybot is not allowed to act as {user} on this cluster: {user} must be in the "
            "skybot-users group and /etc/sudoers.d/skybot must be installed."
        )
    if "unknown user" in lowered:
        return f"There is no user {user} on this cluster."
    if "command not found" in lowered or "no such file" in lowered:
        return (
            f"The skybot runner is not installed at {runner}: an admin must run "
            "`skybot install runner` as root."
        )
    last = text.splitlines()[-1] if text else "no output"
    return f"The skybot runner failed for {user}: {last[:500]}"


async def call_runner(
    user: str,
    request: RunnerRequest,
    *,
    sudo: str = DEFAULT_SUDO,
    runner: str = DEFAULT_RUNNER,
    timeout: float = 60,
    prefix: Sequence[str] = (),
    cluster: str = "",
) -> RunnerReply:
    """Run one request through skybot-runner as `user` and return its reply.

    `cluster`: the name runner.toml knows the cluster by, where the bot serves several
    ("" for today's one cluster, whose Slurm is runner.toml's top level).
    `prefix` goes in front of the sudo command line; tests use ["runuser", "-u", "skybot",
    "--"] to make the call as the service user from a root test process.
    """
    if not is_cluster_user_name(user):
        return _error(f"{user!r} is not a valid cluster user name.")
    if user == "root":
        return _error("skybot never acts as root.")
    if request.get("action") != "version":
        # The cluster by name only: runner.toml says where its Slurm is.
        named = {"cluster": cluster} if cluster else {}
        request = {**request, "bot_version": __version__, **named}
    try:
        payload = json.dumps(request).encode("utf-8")
    except (TypeError, ValueError) as exc:
        return _error(f"The runner request could not be encoded as JSON ({exc}).")

    argv = [*prefix, sudo, "-n", "-u", user, "--", runner]
    ran = await _run(argv, payload, timeout)
    if isinstance(ran, dict):
        return ran
    return _reply(user, runner, *ran)


async def _run(
    argv: list[str], payload: bytes, timeout: float
) -> tuple[int | None, bytes, bytes] | RunnerReply:
    """`argv` with `payload` on its stdin: its exit status, stdout and stderr, or the error
    reply when it cannot start or does not answer within `timeout` seconds."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=SUDO_ENV,
            cwd="/",
            # No controlling terminal: sudo has nothing to prompt on and allocates no pty.
            start_new_session=True,
        )
    except FileNotFoundError:
        return _error(f"Cannot run {argv[0]}: it is not installed.")
    except OSError as exc:
        return _error(f"Cannot run {argv[0]}: {exc.strerror}.")

    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(payload), timeout)
    except TimeoutError:
        # sudo runs as root, so the bot may not be able to signal it; its process group
        # (start_new_session) is tried first, then the process itself.
        for kill in (lambda: os.killpg(proc.pid, 9), proc.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 5)
        return {
            **_error(
                f"The skybot runner did not answer within {timeout:g} s; if this was a "
                "submission, check squeue before trying again."
            ),
            # It may still act (sudo is root's, so maybe not killed): the submission worker
            # asks again later instead of reporting a failure that may not be one.
            "outcome_unknown": True,
        }
    return proc.returncode, stdout, stderr


def _reply(
    user: str, runner: str, returncode: int | None, stdout: bytes, stderr: bytes
) -> RunnerReply:
    """The runner's reply from what the process wrote, or the error reply saying why none."""
    out = stdout[:MAX_REPLY_BYTES].decode("utf-8", "replace").strip()
    if out:
        try:
            reply = json.loads(out)
        except ValueError:
            reply = None
        if is_reply(reply):
            mismatch = version_mismatch(reply, runner)
            if mismatch is not None:
                log.error("runner version mismatch: %s", mismatch)
                return _error(mismatch)
            if not reply["ok"] and not isinstance(reply.get("error"), str):
                reply["error"] = NO_REASON
            return reply
        return _error(f"The skybot runner gave an unreadable answer for {user}.")
    if returncode is not None and returncode < 0:
        # Killed before it answered (a service stop signals every process of the unit): it
        # may have acted, so a submission is settled later by asking, not reported failed.
        return {
            **_error(f"The skybot runner was stopped by signal {-returncode}."),
            "outcome_unknown": True,
        }
    return _error(_explain_sudo_failure(user, stderr.decode("utf-8", "replace"), runner))
