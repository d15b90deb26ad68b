"""What the ack path does without the general machinery (issue 32) must be what that
machinery would have done."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import fields

import pytest
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack_link import sdk_log, socket_mode_handler
from handlers.request import CommandRequest, incoming_request


def test_the_incoming_request_is_the_dataclass_one() -> None:
    made = incoming_request("T1", "U1", "gpus hoffman-lab", "alice", "C1")
    expected = CommandRequest(
        team_id="T1",
        user_id="U1",
        text="gpus hoffman-lab",
        cluster_user="alice",
        channel_id="C1",
        now=made.now,
    )
    assert made == expected
    assert repr(made) == repr(expected)
    # Field for field and in the same order (the router rebuilds requests from __dict__).
    assert list(made.__dict__.items()) == list(expected.__dict__.items())
    assert [f.name for f in fields(CommandRequest)] == list(made.__dict__)
    with pytest.raises(AttributeError):
        made.text = "other"  # type: ignore[misc]


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
