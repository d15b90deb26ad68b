"""Asking `/sky` something in a test: the request an edge would build, through `dispatch`;
and what every answer must be (Slack-safe, one line for bad input)."""

from __future__ import annotations

from typing import Any

from core.view import ClusterView
from handlers.commands import command_table
from handlers.deadline import ACK_DEADLINE_SECONDS, LateReply
from handlers.reply import MAX_BLOCKS, MAX_SECTION_CHARS, Reply
from handlers.request import CommandRequest
from handlers.router import CommandTable, dispatch
from handlers.services import Services
from tests.support.sample_cluster import NOW, cluster


def answer_from_view(table: CommandTable, view: ClusterView, text: str, **asker: Any) -> Reply:
    """A read-only answer, as the console gets it. Without services dispatch must not
    suspend, so it is driven one step here, from inside an event loop or not."""
    coroutine = dispatch(table, CommandRequest(text=text, **asker), view)
    try:
        coroutine.send(None)
    except StopIteration as done:
        reply: Reply = done.value
        return reply
    coroutine.close()
    raise AssertionError(f"dispatch awaited something answering {text!r} without services")


async def answer_with_services(
    table: CommandTable,
    view: ClusterView,
    services: Services,
    text: str,
    *,
    late: LateReply | None = None,
    deadline: float = ACK_DEADLINE_SECONDS,
    **asker: Any,
) -> Reply:
    """Any answer, as Slack's listener gets it once it knows who asked."""
    request = CommandRequest(text=text, **asker)
    return await dispatch(table, request, view, services, late=late, deadline=deadline)


def ask(
    text: str,
    view: ClusterView | None = None,
    cluster_user: str | None = "alice",
    now: float = NOW,
) -> Reply:
    reply = answer_from_view(
        command_table(),
        view or cluster(),
        text,
        team_id="T1",
        user_id="U1",
        cluster_user=cluster_user,
        now=now,
    )
    assert_slack_safe(reply)
    return reply


def assert_slack_safe(reply: Reply) -> None:
    assert reply.text.strip()
    assert 0 < len(reply.blocks) <= MAX_BLOCKS
    for block in reply.blocks:
        texts = [block["text"]] if "text" in block else block.get("elements", [])
        for item in texts:
            assert len(item["text"]) <= MAX_SECTION_CHARS
    assert "internal error" not in reply.text


def block_text(reply: Reply) -> str:
    parts = []
    for block in reply.blocks:
        items = [block["text"]] if "text" in block else block.get("elements", [])
        parts += [item["text"] for item in items]
    return "\n".join(parts)


def one_liner(reply: Reply) -> str:
    """Bad input gets one short line, in one section."""
    assert len(reply.blocks) == 1
    assert "\n" not in reply.text
    return reply.text
