"""Tokens and the signing secret never reach a log line, even at DEBUG."""

from __future__ import annotations

import logging
from pathlib import Path

import aiohttp
import pytest
from msgspec.structs import replace

from bot.config import DatabaseConfig, SlackConfig, SlurmConfig, load_config
from tests.support.bot_process import free_port, running_bot, wait_until_listening
from tests.support.slack_standin import SlackStandIn, signed_slash_command

SIGNING_SECRET = "signing-secret-that-must-never-be-logged"


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_no_secret_in_any_log_record(
    mode: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    port = free_port()
    config = replace(
        load_config(None),
        slack=SlackConfig(mode=mode, http_port=port),
        slurm=SlurmConfig(bin_dir=str(tmp_path / "no-slurm"), poll_seconds=60),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
    )
    async with SlackStandIn() as slack, running_bot(config, slack, SIGNING_SECRET, stop_timeout=20):
        if mode == "socket":
            await slack.wait_for_socket_connection(timeout=10)
            for text in ("help", "gpus hoffman-lab", "link root", "jobs"):
                await slack.send_slash_command(command="/sky", text=text, timeout=10)
        else:
            url = f"http://127.0.0.1:{port}/slack/events"
            await wait_until_listening(url)
            async with aiohttp.ClientSession() as session:
                for wrong in (False, True):
                    req = signed_slash_command(
                        SIGNING_SECRET, command="/sky", text="help", wrong_secret=wrong
                    )
                    async with session.post(url, data=req.body, headers=req.headers):
                        pass
    lines = [caplog.handler.format(r) for r in caplog.records]
    assert len(lines) > 5, "the bot should have logged something to check"
    for secret in (slack.bot_token, slack.app_token, SIGNING_SECRET):
        leaks = [line for line in lines if secret in line]
        assert not leaks, leaks[:3]
