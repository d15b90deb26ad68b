"""Running the bot in tests: as a real process (so a test can SIGKILL it), or in this one."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import aiohttp
from msgspec.structs import replace

from bot.config import (
    Config,
    DatabaseConfig,
    IdentityConfig,
    Secrets,
    SlackConfig,
    SlurmConfig,
    load_config,
)
from bot.service import run_bot
from tests.slack_standin import SlackStandIn, SlackUser

# The test users in the stand-in's one workspace, each linked to their cluster account, so
# their job DMs can be told apart.
TEAM = "T0STANDIN"
SLACK_IDS = {"alice": "UALICE", "bob": "UBOB", "carol": "UCAROL", "dave": "UDAVE"}


def standin_secrets(slack: SlackStandIn, signing_secret: str = "") -> Secrets:
    """The tokens the stand-in accepts, and where the bot reaches it."""
    return Secrets(
        bot_token=slack.bot_token,
        app_token=slack.app_token,
        signing_secret=signing_secret,
        api_url=slack.api_url,
    )


@asynccontextmanager
async def running_bot(
    config: Config, slack: SlackStandIn, signing_secret: str = "", stop_timeout: float = 30
) -> AsyncIterator[None]:
    """`skybot run` in this event loop against the stand-in; stopped (and awaited) on exit,
    so an exception inside the bot fails the test."""
    stop = asyncio.Event()
    task = asyncio.create_task(run_bot(config, standin_secrets(slack, signing_secret), stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, stop_timeout)


def start_bot(
    config_file: Path,
    slack: SlackStandIn,
    skybot: Sequence[str] = (sys.executable, "-m", "bot.cli"),
    *,
    cwd: Path | None = None,
    environment: Mapping[str, str] = os.environ,
    log: IO[bytes] | None = None,
    api_url: str | None = None,
    signing_secret: str = "",
    stderr: int | IO[bytes] = subprocess.DEVNULL,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """`skybot run` as a process with the stand-in's tokens: this checkout's by default, or
    another `skybot` command (an installed one, started from `cwd` with `environment`); its
    output to `log` (else stderr to `stderr`). `api_url` sends its Web API calls elsewhere
    (e.g. nowhere, for an unreachable Slack)."""
    env = {
        **environment,
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_APP_TOKEN": slack.app_token,
        "SLACK_API_URL": api_url or slack.api_url,
    }
    if signing_secret:
        env["SLACK_SIGNING_SECRET"] = signing_secret
    for inherited in ("JOURNAL_STREAM", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        env.pop(inherited, None)  # whatever runs the tests, the bot is not its service
    env.update(extra_env or {})
    return subprocess.Popen(
        [*skybot, "run", "--config", str(config_file)],
        env=env,
        cwd=cwd,
        stdout=log or subprocess.DEVNULL,
        stderr=subprocess.STDOUT if log else stderr,
    )


def free_port() -> int:
    """A loopback port nothing listens on right now, for the bot's HTTP mode."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_until_listening(url: str, attempts: int = 100) -> None:
    """The bot starts its HTTP server in the background: wait until it accepts connections."""
    async with aiohttp.ClientSession() as session:
        for _ in range(attempts):
            try:
                async with session.get(url):
                    return
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.05)
    raise TimeoutError(f"nothing listening at {url}")


def linked_users() -> list[SlackUser]:
    return [SlackUser(slack_id, user) for user, slack_id in SLACK_IDS.items()]


def linked_bot_config(tmp_path: Path, slurm: SlurmConfig | None = None, **overrides: Any) -> Config:
    """The built-in test-cluster config over Socket Mode, polling every 2 s, with its own
    database and every test user linked (`overrides` replace further sections)."""
    return replace(
        load_config(None),
        slack=SlackConfig(mode="socket"),
        slurm=slurm or SlurmConfig(poll_seconds=2),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
        identity=IdentityConfig(
            links={f"{TEAM}/{slack_id}": user for user, slack_id in SLACK_IDS.items()}
        ),
        **overrides,
    )


def dms_about(slack: SlackStandIn, job_id: int) -> list[str]:
    """The texts of every message the stand-in accepted that names this job."""
    pattern = re.compile(rf"\bJob {job_id}\b")
    return [
        str(call.params.get("text"))
        for call in slack.calls_to("chat.postMessage")
        if call.ok and pattern.search(str(call.params.get("text")))
    ]
