"""`skybot doctor` run as an admin runs it: a subprocess of this checkout, as root, with the
Slack stand-in's tokens. Shared by the doctor tests with and without the cluster."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.slack_standin import SlackStandIn

REPO = Path(__file__).resolve().parents[2]
SERVICE_USER = "skybot"


@dataclass
class Result:
    status: int
    output: str

    def line(self, name: str) -> str:
        """The first checklist line for check `name` (e.g. "sudo rule")."""
        return next((ln for ln in self.output.splitlines() if ln[2:].startswith(f"{name}:")), "")


async def run_doctor(
    config: Path,
    slack: SlackStandIn,
    *,
    bot_token: str | None = None,
    service_user: str | None = SERVICE_USER,
) -> Result:
    """The doctor as root; checking as `service_user`, or as root itself when None."""
    as_user = ["--service-user", service_user] if service_user else []
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "SLACK_BOT_TOKEN": bot_token or slack.bot_token,
        "SLACK_APP_TOKEN": slack.app_token,
        "SLACK_API_URL": slack.api_url,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "doctor", "--config", str(config), *as_user,
        env=env, cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(process.communicate(), 60)
    text = output.decode()
    for secret in (slack.bot_token, slack.app_token, bot_token):
        if secret:
            assert secret not in text, "the doctor printed a token"
            assert secret.split("-", 1)[1] not in text, "the doctor printed part of a token"
    return Result(process.returncode or 0, text)
