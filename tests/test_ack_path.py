"""The ack path's settings around Bolt: the Socket Mode logger's level, and Slack's URL
checks answered over HTTP only."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from bot.app import build_app
from bot.config import Secrets, SlackConfig, load_config
from bot.slack_link import sdk_log, socket_mode_handler
from handlers.identity import IdentityDirectory
from handlers.services import Services
from store.reader import SnapshotCache
from store.writer import StoreWriter


@pytest.fixture
def root_level() -> Iterator[None]:
    root, sdk = logging.getLogger(), sdk_log.level
    before = root.level
    yield
    root.setLevel(before)
    sdk_log.setLevel(sdk)


@pytest.mark.parametrize("level", [logging.INFO, logging.DEBUG])
async def test_socket_mode_logger_says_its_level(root_level: None, level: int) -> None:
    """Bolt's Socket Mode adapter makes a debug line per ack when `logger.level <= DEBUG`
    (NOTSET passes): the logger's own level must say what it inherits."""
    logging.getLogger().setLevel(level)
    sdk_log.setLevel(logging.NOTSET)
    app = AsyncApp(
        client=AsyncWebClient(token="xoxb-unused", base_url="http://127.0.0.1:1/"),
        signing_secret="unused",
        request_verification_enabled=False,
    )
    handler = socket_mode_handler(app, "xapp-unused")
    assert handler.client.logger is sdk_log
    assert (handler.client.logger.level <= logging.DEBUG) == (level == logging.DEBUG)
    await handler.client.close()


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_slacks_url_checks_are_answered_over_http(tmp_path: Path, mode: str) -> None:
    """Over HTTP Slack checks the Request URL (url_verification, ssl_check) and skybot must
    answer; over Socket Mode nothing sends them, and skybot leaves Bolt's per-request
    middleware for them off."""
    config = replace(load_config(None), slack=SlackConfig(mode=mode))
    writer = StoreWriter(tmp_path / "skybot.db")

    async def no_runner(user: str, request: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("no runner here")

    identity = IdentityDirectory(config.identity, writer)
    services = Services(config, identity, no_runner, writer=writer)
    cache = SnapshotCache(tmp_path / "skybot.db", config.default_cluster.name, ())
    client = AsyncWebClient(token="xoxb-unused", base_url="http://127.0.0.1:1/")
    app = build_app(config, Secrets(signing_secret="s3cret"), cache, services, client=client)
    body = json.dumps({"type": "url_verification", "challenge": "c-123", "token": "t"})
    timestamp = str(int(time.time()))
    signature = SignatureVerifier("s3cret").generate_signature(timestamp=timestamp, body=body)
    assert signature is not None
    headers: dict[str, str | Sequence[str]] = {
        "content-type": "application/json",
        "x-slack-request-timestamp": timestamp,
        "x-slack-signature": signature,
    }
    request_mode = "http" if mode == "http" else "socket_mode"
    try:
        answer = await app.async_dispatch(
            AsyncBoltRequest(body=body, headers=headers, mode=request_mode)
        )
    finally:
        writer.close()
    if mode == "http":
        assert answer.status == 200 and json.loads(answer.body) == {"challenge": "c-123"}
    else:
        assert answer.status == 404
