"""Asking `/sky` something in a test: the request an edge would build, through `dispatch`."""

from __future__ import annotations

from typing import Any

from core.view import ClusterView
from handlers.deadline import ACK_DEADLINE_SECONDS, LateReply
from handlers.reply import Reply
from handlers.request import CommandRequest
from handlers.router import CommandTable, dispatch
from handlers.services import Services


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
