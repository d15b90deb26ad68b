"""The router's one deadline for actions and the per-user limit on commands that start the runner.

Unit tests: the action is a stand-in coroutine that waits on an event the test controls, so
"too slow" is a fact of the test, not a race against a clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.config import load_config
from core.rate_limit import RateLimiter
from handlers.commands import command_table
from handlers.identity import IdentityDirectory
from handlers.reply import Reply, simple
from handlers.router import Command, CommandRequest, CommandTable, UsageError
from handlers.services import Services
from store.writer import StoreWriter
from tests.support.asking import answer_with_services
from tests.support.sample_cluster import NOW, cluster


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    """What the stand-in actions are handed; they use none of it."""

    async def no_runner(user: str, request: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("the stand-in actions start no runner")

    writer = StoreWriter(tmp_path / "skybot.db")
    config = load_config(None)
    yield Services(config, IdentityDirectory(config.identity, writer), no_runner, writer=writer)
    writer.close()


def table_with(act: Any, starts_runner: bool = True) -> CommandTable:
    table = CommandTable()
    table.add(Command("act", "act", "an action", act=act, starts_runner=starts_runner))
    table.add(Command("look", "look", "a read", run=lambda r, v: simple("looked")))
    return table


async def ask(
    table: CommandTable,
    text: str,
    services: Services,
    *,
    late: Any = None,
    limiter: RateLimiter | None = None,
    user_id: str = "UALICE",
    now: float = NOW,
    deadline: float = 0.05,
) -> Reply:
    return await answer_with_services(
        table,
        cluster(),
        replace(services, limiter=limiter),
        text,
        team_id="T1",
        user_id=user_id,
        cluster_user="alice",
        now=now,
        late=late,
        deadline=deadline,
    )


async def test_a_slow_action_is_acked_as_working_and_answered_later(services: Services) -> None:
    release = asyncio.Event()

    async def slow(request: CommandRequest, services: Any) -> Reply:
        await release.wait()
        return simple("done: cancelled")

    delivered: asyncio.Queue[Reply] = asyncio.Queue()
    ack = await ask(table_with(slow), "act --here", services, late=delivered.put)
    assert ack.text.startswith("⏳ Working on `/sky act`")
    assert not ack.in_channel  # "working on it" is for the asker only
    assert delivered.empty()
    release.set()
    answer = await asyncio.wait_for(delivered.get(), 10)
    assert answer.text == "done: cancelled" and answer.in_channel


async def test_a_quick_action_is_answered_in_the_ack(services: Services) -> None:
    async def quick(request: CommandRequest, services: Any) -> Reply:
        return simple("done at once")

    delivered: list[Reply] = []

    async def late(reply: Reply) -> None:
        delivered.append(reply)

    ack = await ask(table_with(quick), "act", services, late=late, deadline=10)
    assert ack.text == "done at once" and delivered == []


async def test_a_slow_action_that_fails_is_apologised_for_later(services: Services) -> None:
    release = asyncio.Event()

    async def broken(request: CommandRequest, services: Any) -> Reply:
        await release.wait()
        raise RuntimeError("boom")

    delivered: asyncio.Queue[Reply] = asyncio.Queue()
    assert "Working on" in (await ask(table_with(broken), "act", services, late=delivered.put)).text
    release.set()
    assert "internal error" in (await asyncio.wait_for(delivered.get(), 10)).text


async def test_cancel_has_no_deadline_of_its_own() -> None:
    """The old 2.5 s guard inside cancel is gone: the router's deadline is the only one."""
    cancel = command_table().get("cancel")
    assert cancel is not None and cancel.starts_runner
    import handlers.commands.submit as submit

    assert not hasattr(submit, "CANCEL_WAIT_SECONDS")


def test_commands_that_start_the_runner_are_marked() -> None:
    marked = {c.name for c in command_table().all() if c.starts_runner}
    assert marked == {"submit", "cancel", "link", "log"}


# ------------------------------------------------------------------ rate limit


def test_bucket_allows_a_burst_then_one_per_refill() -> None:
    limiter = RateLimiter(capacity=3, refill_seconds=10)
    assert [limiter.take("a", 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("a", 0.0) == 10.0
    assert limiter.take("a", 4.0) == 6.0  # refused calls cost nothing
    assert limiter.take("a", 10.0) == 0.0
    assert limiter.take("b", 10.0) == 0.0  # another key has its own bucket
    assert limiter.take("a", 10_000.0) == 0.0 and limiter.take("a", 10_000.0) == 0.0


async def test_runner_commands_are_limited_per_user_with_a_clear_answer(services: Services) -> None:
    calls = 0

    async def act(request: CommandRequest, services: Any) -> Reply:
        nonlocal calls
        calls += 1
        return simple("ran")

    table = table_with(act)
    limiter = RateLimiter(capacity=5, refill_seconds=10)
    answers = [(await ask(table, "act", services, limiter=limiter)).text for _ in range(6)]
    assert answers[:5] == ["ran"] * 5 and calls == 5
    assert answers[5] == (
        "Slow down: `/sky act` act on the cluster as you, and you have used them a lot just "
        "now. Try again in 10 s."
    )
    # Others are not slowed down by alice, reads are never limited, and time refills.
    assert (await ask(table, "act", services, limiter=limiter, user_id="UBOB")).text == "ran"
    assert (await ask(table, "look", services, limiter=limiter)).text == "looked"
    assert (await ask(table, "act", services, limiter=limiter, now=NOW + 10)).text == "ran"


async def test_commands_that_do_not_start_the_runner_are_not_limited(services: Services) -> None:
    async def act(request: CommandRequest, services: Any) -> Reply:
        return simple("ran")

    table = table_with(act, starts_runner=False)
    limiter = RateLimiter(capacity=1, refill_seconds=10)
    assert [(await ask(table, "act", services, limiter=limiter)).text for _ in range(3)] == [
        "ran"
    ] * 3


async def test_refused_input_gives_its_token_back(services: Services) -> None:
    """Bad input starts nothing, so it costs nothing; an answer after the runner ran does."""

    async def picky(request: CommandRequest, services: Any) -> Reply:
        if request.args != ("ok",):
            raise UsageError("Usage: `/sky act ok`")
        return simple("ran")

    table = table_with(picky)
    limiter = RateLimiter(capacity=2, refill_seconds=10)
    assert [(await ask(table, "act typo", services, limiter=limiter)).text for _ in range(5)] == [
        "Usage: `/sky act ok`"
    ] * 5
    assert [(await ask(table, "act ok", services, limiter=limiter)).text for _ in range(3)] == [
        "ran",
        "ran",
        "Slow down: `/sky act` act on the cluster as you, and you have used them a lot just "
        "now. Try again in 10 s.",
    ]
