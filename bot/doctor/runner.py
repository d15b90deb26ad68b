"""The runner: a root-owned file nobody else can change, from the same skybot as the bot."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from bot.config import Config
from bot.doctor.checklist import Check
from bot.doctor.service_user import COMMAND_TIMEOUT_SECONDS, ServiceUser, run_command
from core.runner_contract import is_reply
from core.runner_replies import Version, decode_version

INSTALL_RUNNER = "`skybot install runner sudoers` as root"


def _unsafe(path: Path, info: os.stat_result) -> str | None:
    if info.st_uid != 0:
        return f"{path} is owned by uid {info.st_uid}, not root"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def check_runner(config: Config) -> Check:
    """Whoever can change the runner, or a directory above it, acts as every user."""
    runner = Path(config.runner.path)
    fix = f"Reinstall the runner ({INSTALL_RUNNER}): root:root 0755 in root-owned directories."
    try:
        info = runner.lstat()
    except OSError as error:
        return Check("runner", False, f"{runner}: {error.strerror}", fix)
    if not stat.S_ISREG(info.st_mode):
        return Check("runner", False, f"{runner} is not a regular file", fix)
    problem = _unsafe(runner, info)
    if problem is None and not info.st_mode & stat.S_IXUSR:
        problem = f"{runner} is not executable"
    for parent in runner.parents:
        if problem is not None:
            break
        problem = _unsafe(parent, parent.stat())
    if problem:
        return Check("runner", False, problem, fix)
    mode = stat.S_IMODE(info.st_mode)
    return Check("runner", True, f"{runner} is root-owned, mode {mode:04o}, in root-owned dirs")


async def check_runner_version(config: Config, user: ServiceUser) -> Check:
    """The installed runner must come from this skybot. Run directly (not through sudo), as
    the service user: a `version` request is answered before any identity check."""
    from bot import __version__

    fix = "Run `skybot install runner` as root, with the skybot that runs the bot."
    status, output = await run_command(
        [*user.prefix(), config.runner.path], COMMAND_TIMEOUT_SECONDS, stdin=b'{"action":"version"}'
    )
    try:
        answer = json.loads(output)
    except ValueError:
        answer = None
    version = decode_version(answer) if is_reply(answer) else None
    found = version.version if isinstance(version, Version) else None
    if found is None:
        last = output.strip().splitlines()[-1:] or [f"exit status {status}"]
        return Check(
            "runner version",
            False,
            f"{config.runner.path} did not say its version (older than 0.1.0?): {last[0][:200]}",
            fix,
        )
    if found != __version__:
        return Check(
            "runner version",
            False,
            f"the runner is skybot {found}, the bot is {__version__}: /sky submit, cancel and "
            "link would be refused",
            fix,
        )
    return Check("runner version", True, f"the runner is skybot {found}, like the bot")
