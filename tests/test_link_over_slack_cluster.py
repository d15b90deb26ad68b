"""Issue 27 items 1 and 2 and the new-link notice, as users meet them: the Slack stand-in over
Socket Mode, the real bot, real sudo and the runner installed from this checkout, real users.

* bob's second Slack account, let write alice's link file by an ACL, is refused, and told the
  exact commands that make the file alice's alone;
* `--here` never puts an identity answer (the link command and its code) in the channel;
* a second Slack account linking to alice DMs the first at once, and (the default: one Slack
  account per cluster account) replaces it.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from bot.config import Config, DatabaseConfig, SlackConfig, SlurmConfig, load_config
from tests.support.bot_process import running_bot
from tests.support.cluster import as_user
from tests.support.link_homes import restored_config
from tests.support.slack_standin import SlackStandIn, SlackUser

pytestmark = [
    pytest.mark.cluster,
    # What is checked here is the runner's and the bot's, the same whatever Slurm runs beside
    # it: proven against the host's cluster. The 24.11 sandbox has no setfacl.
    pytest.mark.skipif(
        "SKYBOT_TESTCLUSTER" in os.environ, reason="inside the Slurm 24.11 sandbox: no setfacl"
    ),
]

TEAM = "T0STANDIN"
CHANNEL = "C1"
ALICE, ALICE_PHONE, BOBS_OTHER = "UALICE", "UALICEPHONE", "UBOBSOTHER"


def _config(tmp_path: Path) -> Config:
    base = load_config(None)
    return replace(
        base,
        slack=SlackConfig(mode="socket"),
        slurm=SlurmConfig(poll_seconds=5, caps_poll_seconds=60),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
    )


class Bot:
    def __init__(self, slack: SlackStandIn) -> None:
        self.slack = slack

    async def answer(self, user_id: str, text: str) -> dict[str, Any]:
        return await self.slack.slash_command_answer(
            command="/sky", text=text, user_id=user_id, team_id=TEAM, channel_id=CHANNEL, timeout=10
        )

    async def sky(self, user_id: str, text: str) -> str:
        return str((await self.answer(user_id, text))["text"])

    async def start_link(self, user_id: str, cluster_user: str) -> str:
        answer = await self.sky(user_id, f"link {cluster_user}")
        found = re.search(r"echo ([A-Za-z0-9_-]+) ", answer)
        assert found, answer
        return found.group(1)

    async def link(self, user_id: str, cluster_user: str) -> str:
        """The whole link, as the instructions say: the code written by the user themself."""
        code = await self.start_link(user_id, cluster_user)
        as_user(cluster_user, "sh", "-c", SKYBOTS_OWN_COMMAND.format(code=code))
        return await self.sky(user_id, "link check")

    def dms_to(self, user_id: str) -> list[str]:
        channels = (user_id, self.slack.dm_channel_for(user_id))
        return [
            str(c.params.get("text"))
            for c in self.slack.calls_to("chat.postMessage")
            if c.ok and c.params.get("channel") in channels
        ]


SKYBOTS_OWN_COMMAND = "mkdir -p ~/.config/skybot && echo {code} > ~/.config/skybot/link"


@pytest.fixture
async def bot(tmp_path: Path, checkout_runner: None, clean_queue: None) -> AsyncIterator[Bot]:
    users = [
        SlackUser(ALICE, "alice"),
        SlackUser(ALICE_PHONE, "alice.phone"),
        SlackUser(BOBS_OTHER, "bob.other"),
    ]
    with restored_config("alice"):
        async with (
            SlackStandIn(users=users) as slack,
            running_bot(_config(tmp_path), slack, stop_timeout=20),
        ):
            await slack.wait_for_socket_connection(timeout=15)
            yield Bot(slack)


async def test_an_acl_on_alices_link_file_does_not_link_bobs_other_account(bot: Bot) -> None:
    assert "Linked: you are `alice`" in await bot.link(ALICE, "alice")
    # alice lets bob write her file (a shared-notes habit, or a site's blanket ACL)...
    as_user("alice", "sh", "-c", "setfacl -m u:bob:rw ~/.config/skybot/link")
    # ...and bob's second Slack account asks to be alice, with the code written by bob.
    code = await bot.start_link(BOBS_OTHER, "alice")
    as_user("bob", "sh", "-c", f"echo {code} > /home/alice/.config/skybot/link")

    answer = await bot.sky(BOBS_OTHER, "link check")

    assert answer.startswith("Not linked"), answer
    assert "user bob can write ~/.config/skybot/link (ACL)" in answer
    assert "```setfacl -x u:bob ~/.config/skybot/link```" in answer
    assert "does not know your cluster account" in await bot.sky(BOBS_OTHER, "whoami")
    assert "You are `alice`" in await bot.sky(ALICE, "whoami")
    await asyncio.sleep(2)  # the outbox would have sent a link notice by now
    assert bot.dms_to(ALICE) == []


async def test_identity_answers_are_private_whatever_here_says(bot: Bot) -> None:
    answers = [await bot.answer(ALICE, "link alice --here")]
    code = re.search(r"echo ([A-Za-z0-9_-]+) ", str(answers[0]["text"]))
    assert code, answers[0]
    as_user("alice", "sh", "-c", SKYBOTS_OWN_COMMAND.format(code=code.group(1)))
    for text in ("link check --here", "whoami --here", "--here unlink"):
        answers.append(await bot.answer(ALICE, text))
    assert "Linked: you are `alice`" in answers[1]["text"]
    assert "You are `alice`" in answers[2]["text"]
    assert answers[3]["text"].startswith("Unlinked.")
    assert [a["response_type"] for a in answers] == ["ephemeral"] * 4, answers
    # Nothing reached the channel any other way either.
    await asyncio.sleep(1)
    in_channel = [c for c in bot.slack.calls if c.params.get("channel") == CHANNEL]
    assert in_channel == []
    assert all(p.body.get("response_type") != "in_channel" for p in bot.slack.response_url_posts)
    # Other answers still go to the channel when asked to.
    assert (await bot.answer(ALICE, "help --here"))["response_type"] == "in_channel"


async def test_a_second_slack_account_linking_to_alice_tells_the_first(bot: Bot) -> None:
    assert "Linked: you are `alice`" in await bot.link(ALICE, "alice")

    answer = await bot.link(ALICE_PHONE, "alice")

    assert "Linked: you are `alice`" in answer
    assert f"It was linked to <@{ALICE}>, who has been told and is linked no longer." in answer
    call = await bot.slack.wait_for_call(
        "chat.postMessage",
        timeout=10,
        predicate=lambda c: c.ok and "no longer linked" in str(c.params.get("text")),
    )
    assert call.params["channel"] in (ALICE, bot.slack.dm_channel_for(ALICE))
    assert f"<@{ALICE_PHONE}> has just been linked to it" in call.params["text"]
    assert "does not know your cluster account" in await bot.sky(ALICE, "whoami")
    assert "You are `alice`" in await bot.sky(ALICE_PHONE, "whoami")
    assert len(bot.dms_to(ALICE)) == 1
