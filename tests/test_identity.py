"""Who a Slack user is on the cluster: admin links, the email rule, unlinking."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.config import IdentityConfig, load_config
from handlers.commands.account import unlink
from handlers.identity import IdentityDirectory, LinkRefused
from handlers.router import CommandRequest
from handlers.services import Services
from store.outbox import outbox_rows
from store.writer import StoreWriter
from tests.support.slack_standin import SlackStandIn, SlackUser

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


# ---------------------------------------------------------------- one account, several links


async def _directory(
    writer: StoreWriter, **settings: object
) -> tuple[IdentityDirectory, list[str]]:
    woken: list[str] = []
    config = IdentityConfig(links={f"{T}/UADMIN": "bob"}, **settings)  # type: ignore[arg-type]
    identity = IdentityDirectory(config, writer, wake_sender=lambda: woken.append("wake"))
    await identity.load()
    return identity, woken


async def test_a_new_link_replaces_the_old_one_after_telling_it(writer: StoreWriter) -> None:
    identity, woken = await _directory(writer)
    assert await identity.confirm_link(T, "UFIRST", "alice") == []
    assert await identity.confirm_link(T, "USECOND", "alice") == [(T, "UFIRST")]
    assert woken  # the notice goes out now, not at the sender's next tick
    (notice,) = await writer.run(outbox_rows)
    assert notice["target"] == "UFIRST"
    assert "no longer linked to the cluster account `alice`" in notice["text"]
    assert "<@USECOND> has just been linked to it" in notice["text"]
    assert identity.slack_users_of("alice") == [(T, "USECOND")]
    # The same, as a restarted skybot reads it back.
    restarted, _ = await _directory(writer)
    assert restarted.slack_users_of("alice") == [(T, "USECOND")]
    assert restarted.lookup(T, "UFIRST") is None
    # Linking again the account already linked tells nobody.
    assert await identity.confirm_link(T, "USECOND", "alice") == []
    assert len(await writer.run(outbox_rows)) == 1


async def test_a_site_may_allow_several_slack_accounts_each_told_of_the_next(
    writer: StoreWriter,
) -> None:
    identity, _ = await _directory(writer, several_slack_accounts=True)
    await identity.confirm_link(T, "UFIRST", "alice")
    await identity.confirm_link(T, "USECOND", "alice")
    assert await identity.confirm_link(T, "UTHIRD", "alice") == [(T, "UFIRST"), (T, "USECOND")]
    told = {row["target"]: row["text"] for row in await writer.run(outbox_rows)}
    assert set(told) == {"UFIRST", "USECOND"}
    assert "<@UTHIRD> has just been linked to your cluster account `alice` too" in told["UFIRST"]
    assert identity.slack_users_of("alice") == [(T, "UFIRST"), (T, "USECOND"), (T, "UTHIRD")]
    # An account the admins linked in the configuration is told too, and stays.
    assert await identity.confirm_link(T, "UPROVEN", "bob") == [(T, "UADMIN")]
    assert identity.slack_users_of("bob") == [(T, "UADMIN"), (T, "UPROVEN")]


async def test_a_link_set_by_the_admins_is_not_replaced(writer: StoreWriter) -> None:
    identity, _ = await _directory(writer)
    with pytest.raises(LinkRefused, match="cluster admins have linked `bob`"):
        await identity.confirm_link(T, "UPROVEN", "bob")
    assert identity.slack_users_of("bob") == [(T, "UADMIN")]
    assert await writer.run(outbox_rows) == []


async def test_the_email_rule_does_not_replace_a_link(
    directory: tuple[IdentityDirectory, SlackStandIn],
) -> None:
    identity, _ = directory
    await identity.confirm_link(T, "UPROVEN", "alice")
    # UALICE's Slack email says alice, but alice has proven another Slack account.
    assert await identity.resolve(T, "UALICE") is None
    assert identity.slack_users_of("alice") == [(T, "UPROVEN")]
