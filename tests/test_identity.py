"""Who a Slack user is on the cluster: admin links, the email rule, unlinking."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.config import IdentityConfig, load_config
from handlers.commands.account import unlink
from handlers.identity import IdentityDirectory
from handlers.router import CommandRequest
from handlers.services import Services
from store.writer import StoreWriter
from tests.slack_standin import SlackStandIn, SlackUser

T = "T0STANDIN"
MEMBERS = [
    SlackUser("UALICE", "alice", email="Alice@GaTech.edu"),
    SlackUser("UGUEST", "bob", email="bob@gatech.edu", is_restricted=True),
    SlackUser("UGONE", "carol", email="carol@gatech.edu", deleted=True),
    SlackUser("UELSE", "dave", email="dave@example.org"),
    SlackUser("UNOACCOUNT", "eve", email="eve@gatech.edu"),
    SlackUser("UROOT", "root", email="root@gatech.edu"),
    SlackUser("UBOT", "alice-bot", email="alice@gatech.edu", is_bot=True),
]


@pytest.fixture
async def directory(tmp_path: Path) -> AsyncIterator[tuple[IdentityDirectory, SlackStandIn]]:
    writer = StoreWriter(tmp_path / "skybot.db")
    async with SlackStandIn(users=MEMBERS) as slack:
        config = IdentityConfig(email_domain="gatech.edu", links={f"{T}/UADMIN": "bob"})
        identity = IdentityDirectory(config, writer, slack.web_client())
        await identity.load()
        yield identity, slack
    writer.close()


async def test_email_rule_only_for_full_active_members_with_a_real_account(
    directory: tuple[IdentityDirectory, SlackStandIn],
) -> None:
    identity, slack = directory
    # alice exists on this machine (the test cluster's users) with uid >= 1000.
    assert await identity.resolve(T, "UALICE") == "alice"
    assert identity.lookup(T, "UALICE").source == "email"  # type: ignore[union-attr]
    for refused in ("UGUEST", "UGONE", "UELSE", "UNOACCOUNT", "UROOT", "UBOT"):
        assert await identity.resolve(T, refused) is None, refused
    asked = len(slack.calls_to("users.info"))
    assert await identity.resolve(T, "UGUEST") is None
    assert len(slack.calls_to("users.info")) == asked, "a refused member is not re-asked at once"


async def test_admin_links_win_and_map_back_to_slack(
    tmp_path: Path, directory: tuple[IdentityDirectory, SlackStandIn]
) -> None:
    identity, _ = directory
    assert await identity.resolve(T, "UADMIN") == "bob"
    await identity.resolve(T, "UALICE")
    assert identity.slack_users_of("alice") == [(T, "UALICE")]
    assert identity.slack_users_of("bob") == [(T, "UADMIN")]


async def test_unlink_forgets_a_stored_link_but_not_an_admin_one(
    tmp_path: Path, directory: tuple[IdentityDirectory, SlackStandIn]
) -> None:
    identity, _ = directory
    await identity.confirm_link(T, "UPROVEN", "carol")

    async def no_runner(user: str, request: dict) -> dict:
        raise AssertionError("unlink never runs anything as the user")

    services = Services(load_config(None), identity, no_runner)
    request = CommandRequest(team_id=T, user_id="UPROVEN", args=())
    assert (await unlink(request, services)).text.startswith("Unlinked.")
    assert identity.lookup(T, "UPROVEN") is None
    assert (await unlink(request, services)).text.startswith("You were not linked")
    admin = await unlink(CommandRequest(team_id=T, user_id="UADMIN", args=()), services)
    assert "set by the cluster admins" in admin.text
    assert identity.lookup(T, "UADMIN") is not None
