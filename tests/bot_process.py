"""`skybot run` as a real process (so a test can SIGKILL it), talking to a Slack stand-in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
