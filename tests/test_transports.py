"""`skybot run` end to end over both transports, against the local Slack stand-in."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from msgspec.structs import replace

from bot.config import Config, DatabaseConfig, SlackConfig, SlurmConfig, load_config
from tests.support.bot_process import free_port, running_bot, wait_until_listening
from tests.support.slack_standin import SlackStandIn, signed_slash_command

SIGNING_SECRET = "test-signing-secret"


def _config(tmp_path: Path, mode: str, port: int = 3000) -> Config:
    base = load_config(None)
    return replace(
        base,
        slack=SlackConfig(mode=mode, http_port=port),
        # No Slurm here: these tests are about Slack; pollers failing is part of the picture.
        slurm=SlurmConfig(bin_dir=str(tmp_path / "no-slurm"), poll_seconds=60),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
    )


async def test_sky_help_over_socket_mode(tmp_path: Path) -> None:
    async with SlackStandIn() as slack:
        async with running_bot(_config(tmp_path, "socket"), slack):
            await slack.wait_for_socket_connection(timeout=10)
            for text in ("help", ""):
                delivery = await slack.send_slash_command(command="/sky", text=text, timeout=5)
                assert delivery.payload is not None
                assert delivery.payload["response_type"] == "ephemeral"
                assert "/sky help [COMMAND]" in delivery.payload["text"]
                assert delivery.payload["blocks"][0]["type"] == "header"
            unknown = await slack.send_slash_command(command="/sky", text="hlep", timeout=5)
            assert "Did you mean `/sky help`?" in unknown.payload["text"]
        connections_open = slack.calls_to("apps.connections.open")
        assert connections_open and connections_open[0].token == slack.app_token


@pytest.fixture
async def http_bot(tmp_path: Path) -> AsyncIterator[str]:
    port = free_port()
    config = _config(tmp_path, "http", port)
    async with SlackStandIn() as slack, running_bot(config, slack, SIGNING_SECRET):
        url = f"http://127.0.0.1:{port}/slack/events"
        await wait_until_listening(url)
        yield url


async def _post(url: str, **signing: object) -> tuple[int, dict | str]:
    request = signed_slash_command(SIGNING_SECRET, command="/sky", text="help", **signing)
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=request.body, headers=request.headers) as response,
    ):
        if response.content_type == "application/json":
            return response.status, await response.json()
        return response.status, await response.text()


async def test_sky_help_over_signed_http(http_bot: str) -> None:
    status, body = await _post(http_bot)
    assert status == 200
    assert isinstance(body, dict) and "/sky help [COMMAND]" in body["text"]


async def test_bad_signature_is_refused_by_bolt(http_bot: str) -> None:
    status, body = await _post(http_bot, wrong_secret=True)
    assert status == 401
    assert "/sky help" not in str(body)


async def test_six_minute_old_request_is_refused(http_bot: str) -> None:
    status, _ = await _post(http_bot, age_seconds=6 * 60)
    assert status == 401


async def test_who_asked_what_is_logged_at_debug(
    http_bot: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 32: with no access log line per request, an operator still sees each command."""
    caplog.set_level(logging.DEBUG, logger="handlers.slash")
    status, _ = await _post(http_bot)
    assert status == 200
    lines = [r.getMessage() for r in caplog.records if r.name == "handlers.slash"]
    assert len(lines) == 1, lines
    assert lines[0].startswith("/sky 'help' from T1/U1 (None) answered in "), lines
