"""A click's outcome always reaches the user (issue 27 item 6): `skybot run` over Socket Mode
against the stand-in, whose response_url answers 500. No Slurm here: the outcome of a Cancel
click on a job skybot does not see is still an outcome that has to arrive."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from msgspec.structs import replace

from bot.config import Config, DatabaseConfig, IdentityConfig, SlackConfig, SlurmConfig, load_config
from tests.support.bot_process import running_bot
from tests.support.slack_standin import SlackStandIn, SlackUser

GONE = "Job `35` is no longer running or pending: there is nothing to cancel."


def _config(tmp_path: Path) -> Config:
    return replace(
        load_config(None),
        slack=SlackConfig(mode="socket"),
        slurm=SlurmConfig(bin_dir=str(tmp_path / "no-slurm"), poll_seconds=60),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
        identity=IdentityConfig(links={"T0STANDIN/UALICE": "alice"}),
    )


async def _click(slack: SlackStandIn) -> str:
    payload = slack.block_action_payload(
        user_id="UALICE", action_id="skybot_cancel_job:35", value="35"
    )
    await slack.send_block_action(payload, timeout=3.0)
    return str(payload["response_url"])


async def test_a_response_url_answering_500_twice_is_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="handlers.click_answers")
    async with (
        SlackStandIn(users=[SlackUser("UALICE", "alice")]) as slack,
        running_bot(_config(tmp_path), slack),
    ):
        await slack.wait_for_socket_connection(timeout=10)
        slack.fail_next("response_url", status=500, times=2)
        url = await _click(slack)
        post = await slack.wait_for_response_url_post(url=url, timeout=10)
        assert post.body["text"] == GONE
        assert post.body["replace_original"] is True
    failures = [r.getMessage() for r in caplog.records if "answered 500" in r.getMessage()]
    assert len(failures) == 2, failures
    assert "attempt 1 of 5" in failures[0]


async def test_a_response_url_answering_429_is_retried_after_its_retry_after(
    tmp_path: Path,
) -> None:
    """Issue 40: Slack's Retry-After is kept outside the SDK too; the response_url's retry
    came 0.5 s after a 429 that asked for 3 s."""
    async with (
        SlackStandIn(users=[SlackUser("UALICE", "alice")]) as slack,
        running_bot(_config(tmp_path), slack),
    ):
        await slack.wait_for_socket_connection(timeout=10)
        slack.fail_next("response_url", status=429, retry_after=3)
        started = time.monotonic()
        url = await _click(slack)
        post = await slack.wait_for_response_url_post(url=url, timeout=10)
        waited = time.monotonic() - started
        assert post.body["text"] == GONE
    assert waited >= 3.0, f"retried {waited:.2f} s after the click"


async def test_a_response_url_that_keeps_failing_gives_the_outcome_by_dm(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with (
        SlackStandIn(users=[SlackUser("UALICE", "alice")]) as slack,
        running_bot(_config(tmp_path), slack),
    ):
        await slack.wait_for_socket_connection(timeout=10)
        slack.fail_next("response_url", status=500, times=5)
        await _click(slack)
        dm = await slack.wait_for_call(
            "chat.postMessage", timeout=30, predicate=lambda c: GONE in str(c.params.get("text"))
        )
        assert dm.ok and dm.params["channel"] == "UALICE"
        assert slack.response_url_posts == []
    assert any("goes to UALICE by DM" in r.getMessage() for r in caplog.records)


async def test_a_forged_action_id_is_acked_with_one_line_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 27 item 9: an action id no listener has was never acked (Slack shows the clicker
    an error) and each wrote Bolt's multi-line "Unhandled request" block."""
    async with (
        SlackStandIn(users=[SlackUser("UALICE", "alice")]) as slack,
        running_bot(_config(tmp_path), slack),
    ):
        await slack.wait_for_socket_connection(timeout=10)
        caplog.clear()
        for action_id in ("skybot_delete_everything", "skybot_cancel_job:1:2", "x" * 300):
            payload = slack.block_action_payload(user_id="UALICE", action_id=action_id, value="1")
            delivery = await slack.send_block_action(payload, timeout=3.0)
            assert delivery.payload is None or delivery.payload == {}
    logged = [r for r in caplog.records if r.levelno >= logging.WARNING and "poll" not in r.name]
    assert [len(r.getMessage().splitlines()) for r in logged] == [1, 1, 1], logged
    assert all("does not have" in r.getMessage() for r in logged)
    assert not any("Unhandled request" in r.getMessage() for r in caplog.records)
    assert slack.response_url_posts == []
