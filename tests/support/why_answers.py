"""`/sky why` asked of a poller harness as a Slack user would ask it, and the shell commands its
answer tells the reader to type, run as that user."""

from __future__ import annotations

import re
import subprocess
import time
from typing import Any

from handlers.commands import command_table
from handlers.identity import IdentityDirectory
from handlers.services import Services
from tests.support.asking import answer_with_services
from tests.support.poller_harness import Harness

LAB = ("-A", "hoffman-lab", "-p", "hoffman-lab", "--chdir=/tmp", "-o", "/dev/null")


SHELL_COMMANDS = ("scontrol", "scancel", "sbatch")


async def _no_runner(user: str, request: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError("/sky why must not start the runner")


async def why(harness: Harness, question: str, user: str = "alice") -> str:
    """`/sky why QUESTION` as `user` asks it in Slack, after a fresh poll."""
    view = await harness.poll()
    config = harness.config
    services = Services(
        config,
        IdentityDirectory(config.identity, harness.writer),
        _no_runner,
        writer=harness.writer,
        view=lambda: view,
    )
    reply = await answer_with_services(
        command_table(),
        view,
        services,
        f"why {question}",
        team_id="T1",
        user_id="U1",
        cluster_user=user,
        now=time.time(),
    )
    return reply.text


def suggested(text: str) -> list[str]:
    """Every shell command the answer tells its reader to type (in code spans)."""
    return [c for c in re.findall(r"`([^`\n]+)`", text) if c.split()[0] in SHELL_COMMANDS]


def run_as(user: str, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", user, "--", *command.split()],
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/tmp",
    )
