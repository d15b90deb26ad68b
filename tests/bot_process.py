"""Running the bot in tests: as a real process (so a test can SIGKILL it), or on a port."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp

from tests.slack_standin import SlackStandIn


def start_bot(config_file: Path, slack: SlackStandIn) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_APP_TOKEN": slack.app_token,
        "SLACK_API_URL": slack.api_url,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "run", "--config", str(config_file)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
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
