"""A closed Socket Mode connection is replaced within seconds (issue 27 item 9: 5.8 s was
measured). `skybot run` against the stand-in, which closes the socket from its side with a
close frame or a `disconnect` request (as Slack does), or cuts the TCP link with neither (as a
network does): the last is noticed only by slack_sdk's periodic check (bot/slack_link.py's
PING_SECONDS). No Slurm here."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from msgspec.structs import replace

from bot.config import Config, DatabaseConfig, SlackConfig, SlurmConfig, load_config
from bot.slack_link import PING_SECONDS
from tests.support.bot_process import running_bot
from tests.support.slack_standin import SlackStandIn

# A command is answered again this soon after the link went (PING_SECONDS plus a reconnect).
RECONNECT_SECONDS = PING_SECONDS + 1.0


def _config(tmp_path: Path) -> Config:
    return replace(
        load_config(None),
        slack=SlackConfig(mode="socket"),
        slurm=SlurmConfig(bin_dir=str(tmp_path / "no-slurm"), poll_seconds=60),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
    )


@pytest.mark.parametrize("drop", ["close frame", "disconnect request", "cut"])
async def test_a_closed_socket_is_replaced_quickly(tmp_path: Path, drop: str) -> None:
    async with SlackStandIn() as slack, running_bot(_config(tmp_path), slack):
        await slack.wait_for_socket_connection(timeout=10)
        # Twice: the replacement connection is watched and replaced as the first was (a cut
        # waits out PING_SECONDS each time, so a third round would only add that).
        for attempt in range(2, 4):
            started = time.monotonic()
            if drop == "close frame":
                await slack.drop_socket_connections()
            elif drop == "cut":
                slack.cut_socket_connections()
            else:
                await slack.request_reconnect("refresh_requested")
            await slack.wait_for_socket_connection(attempt, timeout=15)
            answer = await slack.send_slash_command(command="/sky", text="help", timeout=15)
            took = time.monotonic() - started
            print(f"{drop}: answered again after {took:.2f} s")
            assert answer.payload is not None and "/sky help" in answer.payload["text"]
            assert took < RECONNECT_SECONDS, f"reconnected after {took:.1f} s"
