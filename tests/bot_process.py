"""Running the bot in tests: as a real process (so a test can SIGKILL it), or in this one."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO

import aiohttp

from bot.config import Config, Secrets
from bot.service import run_bot
from tests.slack_standin import SlackStandIn


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
