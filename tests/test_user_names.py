"""One cluster user-name rule (core/user_names.py) for every place a name comes in.

`/sky jobs NAME` and `/sky link NAME` once used different patterns, so `/sky jobs 1abc` was
looked up while `/sky link 1abc` was refused; now both read a typed name the same way.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import ConfigError, load_config, parse_config
from core.user_names import cluster_user_name, is_cluster_user_name
from handlers.commands import command_table
from handlers.identity import IdentityDirectory
from handlers.services import Services
from store.writer import StoreWriter
from tests.support.asking import answer_with_services, ask
from tests.support.sample_cluster import cluster

VALID = ["alice", "_svc", "a.b-c_d", "a" * 32, "bob2"]
INVALID = [
    "",
    "1abc",  # a leading digit
    "-alice",  # would read as an option
    ".alice",
    "a" * 33,  # longer than utmp holds
    "al ice",
    "alice$",  # a machine account
    "al\u0131ce",  # dotless i
    "\u212aate",  # the Kelvin sign, which lowercases to a plain k
    "<!here>",
]


@pytest.mark.parametrize("name", VALID)
def test_portable_lower_case_names_are_cluster_users(name: str) -> None:
    assert is_cluster_user_name(name)
    assert cluster_user_name(name) == name


@pytest.mark.parametrize("name", INVALID)
def test_anything_else_is_not(name: str) -> None:
    assert not is_cluster_user_name(name)
    assert cluster_user_name(name) is None


def test_typed_names_fold_to_lower_case_but_exact_names_do_not() -> None:
    assert cluster_user_name("Alice") == "alice"
    assert not is_cluster_user_name("Alice")
    assert not is_cluster_user_name(None)


async def _link_answer(tmp_path: Path, typed: str) -> str:
    writer = StoreWriter(tmp_path / "skybot.db")
    try:

        async def no_runner(user: str, request: dict) -> dict:
            raise AssertionError("starting a link runs nothing as the user")

        identity = IdentityDirectory(load_config(None).identity, writer)
        services = Services(load_config(None), identity, no_runner, writer=writer)
        reply = await answer_with_services(
            command_table(), cluster(), services, f"link {typed}", team_id="T1", user_id="U9"
        )
        return reply.text
    finally:
        writer.close()


@pytest.mark.parametrize("typed", ["Alice", "ALICE", "alice"])
async def test_jobs_and_link_read_a_valid_name_alike(tmp_path: Path, typed: str) -> None:
    # alice is one of the test cluster's accounts on this machine (uid >= 1000).
    assert "*`alice`*" in ask(f"jobs {typed}").text
    assert (await _link_answer(tmp_path, typed)).startswith("To prove you are `alice`")


@pytest.mark.parametrize("typed", ["1abc", "a" * 33, "alice$", "\u212aate"])
async def test_jobs_and_link_refuse_an_invalid_name_alike(tmp_path: Path, typed: str) -> None:
    assert "is not a cluster user name" in ask(f"jobs {typed}").text
    assert (await _link_answer(tmp_path, typed)).startswith("There is no cluster account")


def test_config_links_use_the_same_rule() -> None:
    parse_config({"identity": {"links": {"T1/U1": "alice"}}})
    with pytest.raises(ConfigError, match="'1abc' is not a valid cluster user name"):
        parse_config({"identity": {"links": {"T1/U1": "1abc"}}})
