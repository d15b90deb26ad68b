"""Slack's escaped command text (`should_escape: true`) read back once, mentions resolved.

The end-to-end tests send signed HTTP slash commands through the stand-in to the real bot, with
a snapshot written into the store first (no Slurm is touched: slurm.bin_dir does not exist).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from msgspec.structs import replace

from bot.config import Config, DatabaseConfig, IdentityConfig, SlackConfig, SlurmConfig, load_config
from handlers.router import UsageError
from handlers.slack_input import decode_command_text, unescape
from store.db import open_db
from tests.support.bot_process import free_port, running_bot
from tests.support.cluster import wait_for
from tests.support.factories import job
from tests.support.slack_standin import SlackStandIn
from tests.support.slurm_polls import save_slurm_poll

LINKS = {"UBOB": "bob", "WALICE": "alice"}


def decode(text: str) -> str:
    return decode_command_text(text, LINKS.get)


def test_a_mention_becomes_the_linked_cluster_account() -> None:
    assert decode("jobs <@UBOB|bob>") == "jobs bob"
    assert decode("jobs <@UBOB>") == "jobs bob"
    assert decode("jobs <@WALICE|alice.smith>") == "jobs alice"  # an Enterprise Grid id


def test_a_mention_of_someone_unlinked_is_refused_by_name() -> None:
    with pytest.raises(UsageError) as refusal:
        decode("jobs <@UZED|zed>")
    assert str(refusal.value).startswith("<@UZED> has not linked a cluster account to skybot")
    assert "`/sky link`" in str(refusal.value)


def test_other_sequences_become_what_was_typed() -> None:
    assert decode("why <#C123|general>") == "why #general"
    assert decode("x <mailto:a@b.example|a@b.example>") == "x a@b.example"
    assert decode("images <http://torch.org|torch.org>") == "images torch.org"
    assert decode("images <https://example.com/a?b=1&amp;c=2>") == (
        "images https://example.com/a?b=1&c=2"
    )
    assert decode("hi <!here> <!subteam^S123|@gpu-admins>") == "hi @here @gpu-admins"


def test_entities_are_decoded_once_and_never_make_a_mention() -> None:
    assert decode("images torch&gt;=2 a&amp;b") == "images torch>=2 a&b"
    assert decode("x &amp;lt;b&amp;gt;") == "x &lt;b&gt;"
    # What a user types as text arrives escaped: it stays text, not a mention of bob.
    assert decode("jobs &lt;@UBOB&gt;") == "jobs <@UBOB>"
    assert unescape("&amp;amp;") == "&amp;"


# ------------------------------------------------------------------ over the stand-in

TEAM = "T0STANDIN"
SECRET = "slack-input"


def _config(tmp_path: Path, port: int) -> Config:
    return replace(
        load_config(None),
        slack=SlackConfig(mode="http", http_port=port),
        slurm=SlurmConfig(bin_dir=str(tmp_path / "no-slurm"), poll_seconds=60),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
        identity=IdentityConfig(links={f"{TEAM}/UALICE": "alice", f"{TEAM}/UBOB": "bob"}),
    )


@pytest.fixture
async def sky(tmp_path: Path) -> AsyncIterator:
    port = free_port()
    config = _config(tmp_path, port)
    db = open_db(config.database.path)
    try:
        bobs = job(4242, user="bob", name="bobs-run", gpus_by_type={"a40": 1})
        save_slurm_poll(db, [bobs, job(4243, name="alices-run")], [], [], time.time())
    finally:
        db.close()
    async with (
        SlackStandIn() as slack,
        running_bot(config, slack, SECRET),
        aiohttp.ClientSession() as session,
    ):

        async def ask(text: str) -> str:
            signed = slack.signed_slash_command(
                SECRET, command="/sky", text=text, user_id="UALICE", team_id=TEAM
            )
            url = f"http://127.0.0.1:{port}/slack/events"

            async def answered() -> str | None:
                try:
                    async with session.post(url, data=signed.body, headers=signed.headers) as r:
                        assert r.status == 200
                        return str((await r.json())["text"])
                except aiohttp.ClientConnectionError:
                    return None

            return await wait_for(answered, 10, "the bot to listen for HTTP", 0.1)

        yield ask


async def test_jobs_of_a_mentioned_user_over_slack(sky) -> None:  # type: ignore[no-untyped-def]
    answer = await sky("jobs <@UBOB|bob>")
    assert "\n*`bob`*: 1 running (1 GPU)" in "\n" + answer and "bobs-run" in answer
    assert "alices-run" not in answer


async def test_a_mention_of_someone_unlinked_over_slack(sky) -> None:  # type: ignore[no-untyped-def]
    answer = await sky("jobs <@UZED|zed>")
    assert answer.startswith("<@UZED> has not linked a cluster account to skybot")


async def test_escaped_text_is_read_once_over_slack(sky) -> None:  # type: ignore[no-untyped-def]
    # Typed `/sky jobs <@UBOB>` as text: Slack escapes it, and it is not a mention of bob.
    answer = await sky("jobs &lt;@UBOB&gt;")
    assert "is not a cluster user name" in answer and "bobs-run" not in answer
    assert "&lt;@UBOB&gt;" in answer and "<@UBOB>" not in answer
