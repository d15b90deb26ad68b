"""Start-up and /readyz say when exactly-once DMs are off for want of a scope (issue 40).

Without `im:history` skybot cannot read a DM back after a crash mid-send, so it sends it again
(11 of 50 jobs duplicated in a run with 20 kill -9s). That was documented, but nothing told
the admin at start-up. The bot runs here against the stand-in, whose auth.test answers with
the token's scopes in x-oauth-scopes, as Slack's does.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from msgspec.structs import replace

from bot.config import DatabaseConfig, MetricsConfig, SlackConfig, SlurmConfig, load_config
from tests.support.bot_process import free_port, running_bot, wait_until_listening
from tests.support.cluster import wait_for
from tests.support.slack_standin import SlackStandIn

ALL_BUT_HISTORY = "commands,chat:write,files:write,im:write,channels:read,groups:read"


async def _exactly_once(base: str) -> dict[str, Any]:
    """/readyz's exactly_once check, once the start-up auth.test has answered."""
    async with aiohttp.ClientSession() as session:

        async def checked() -> dict[str, Any] | None:
            async with session.get(f"{base}/readyz") as response:
                check: dict[str, Any] = (await response.json())["checks"]["exactly_once"]
            return None if check["detail"].startswith("not checked") else check

        return await wait_for(checked, 15, "/readyz to report the start-up auth.test", 0.05)


@pytest.mark.parametrize(
    ("scopes", "said"),
    [
        (ALL_BUT_HISTORY, "off: the bot token lacks im:history"),
        (ALL_BUT_HISTORY + ",im:history", "on: the bot token has im:history"),
    ],
)
async def test_start_up_and_readyz_say_whether_exactly_once_is_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, scopes: str, said: str
) -> None:
    port = free_port()
    config = replace(
        load_config(None),
        slack=SlackConfig(mode="socket"),
        slurm=SlurmConfig(bin_dir=str(tmp_path / "no-slurm"), poll_seconds=60),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
        metrics=MetricsConfig(port=port),
    )
    base = f"http://127.0.0.1:{port}"
    caplog.set_level(logging.INFO, logger="bot.scopes")
    async with SlackStandIn(bot_scopes=scopes) as slack, running_bot(config, slack):
        await wait_until_listening(f"{base}/readyz")
        check = await _exactly_once(base)
    assert check["detail"].startswith(said), check
    # Said, not unready: skybot works without it, sending such a DM again.
    assert check["ok"] is True
    lines = [r for r in caplog.records if r.name == "bot.scopes" and "exactly-once" in r.message]
    assert [r.getMessage().startswith(f"exactly-once DMs {said}") for r in lines] == [True]
    assert lines[0].levelno == (logging.WARNING if said.startswith("off") else logging.INFO)
