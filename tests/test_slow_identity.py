"""Slack's 3 s ack budget covers the whole request, finding out who asked included (issue 27
item 8): `skybot run` over Socket Mode against the stand-in, with `users.info` (the email
rule's one Slack call) answering only after Slack's 3 s have passed. No Slurm here: the
pollers failing is fine."""

from __future__ import annotations

import time
from pathlib import Path

from msgspec.structs import replace

from bot.config import Config, DatabaseConfig, IdentityConfig, SlackConfig, SlurmConfig, load_config
from tests.support.bot_process import running_bot
from tests.support.slack_standin import SlackStandIn, SlackUser, slash_commands_envelope

ACK_SECONDS = 3.0
# users.info answers after Slack's ack budget: a request that waited for it is acked too late
# (the test fails), and the test waits no longer than that for the late answer.
USERS_INFO_DELAY = ACK_SECONDS + 0.5


def _config(tmp_path: Path) -> Config:
    return replace(
        load_config(None),
        slack=SlackConfig(mode="socket"),
        slurm=SlurmConfig(bin_dir=str(tmp_path / "no-slurm"), poll_seconds=60),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
        identity=IdentityConfig(email_domain="example.org"),
    )


async def test_a_slow_users_info_still_gets_an_ack_in_time(tmp_path: Path) -> None:
    carol = SlackUser("UCAROL", "carol", email="carol@example.org")
    async with SlackStandIn(users=[carol]) as slack, running_bot(_config(tmp_path), slack):
        await slack.wait_for_socket_connection(timeout=10)
        slack.delay_next("users.info", USERS_INFO_DELAY)
        payload = slack.slash_command_payload(command="/sky", text="help", user_id="UCAROL")
        started = time.monotonic()
        delivery = await slack.send_envelope(slash_commands_envelope(payload), timeout=10)
        acked_after = time.monotonic() - started
        assert acked_after < ACK_SECONDS, f"acked after {acked_after:.2f} s"
        assert delivery.payload is not None
        assert delivery.payload["text"].startswith("⏳ Working on `/sky help`"), delivery.payload
        late = await slack.wait_for_response_url_post(url=payload["response_url"], timeout=15)
        assert "/sky help [COMMAND]" in late.body["text"]
        assert late.body["response_type"] == "ephemeral"
        assert len(slack.calls_to("users.info")) == 1
        # Asked again within the hour, the email rule is not retried: answered in the ack.
        again = await slack.send_slash_command(command="/sky", text="help", user_id="UCAROL")
        assert again.payload is not None and "/sky help [COMMAND]" in again.payload["text"]


async def test_a_slash_command_is_acked_within_1_s_whatever_users_info_does(
    tmp_path: Path,
) -> None:
    """Issue 40: with users.info answering after 5 s, the ack came at 2.50 s (skybot's own
    deadline for the whole answer), leaving Slack half a second of its 3. Slack's own calls
    now get 0.5 s of it: the ack leaves within 1 s, and the answer follows."""
    carol = SlackUser("UCAROL", "carol", email="carol@example.org")
    async with SlackStandIn(users=[carol]) as slack, running_bot(_config(tmp_path), slack):
        await slack.wait_for_socket_connection(timeout=10)
        slack.delay_next("users.info", 5.0)
        payload = slack.slash_command_payload(command="/sky", text="help", user_id="UCAROL")
        started = time.monotonic()
        delivery = await slack.send_envelope(slash_commands_envelope(payload), timeout=10)
        acked_after = time.monotonic() - started
        assert acked_after < 1.0, f"acked after {acked_after:.2f} s"
        assert delivery.payload is not None
        assert delivery.payload["text"].startswith("⏳ Working on `/sky help`"), delivery.payload
        late = await slack.wait_for_response_url_post(url=payload["response_url"], timeout=15)
        assert "/sky help [COMMAND]" in late.body["text"]


async def test_a_slow_users_info_does_not_hold_the_home_tab_event(tmp_path: Path) -> None:
    """Bolt acks an event when its listener returns: a Home tab built after a slow users.info
    held the ack past Slack's 3 s, and Slack sends an unacked event again."""
    carol = SlackUser("UCAROL", "carol", email="carol@example.org")
    async with SlackStandIn(users=[carol]) as slack, running_bot(_config(tmp_path), slack):
        await slack.wait_for_socket_connection(timeout=10)
        slack.delay_next("users.info", USERS_INFO_DELAY)
        await slack.send_app_home_opened("UCAROL", timeout=ACK_SECONDS)
        published = await slack.wait_for_call("views.publish", timeout=15)
        assert published.ok and published.params["user_id"] == "UCAROL"
