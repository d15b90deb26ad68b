"""Slack's 3 s: an answer that awaits (an action, the runner, the store, who asked) is given
until the deadline; past it the ack says it is working on it, and the answer follows through
`late` (the command's response_url, or a DM)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from handlers.reply import Reply, simple

log = logging.getLogger(__name__)

# Delivers an answer that missed the ack (response_url or DM).
LateReply = Callable[[Reply], Awaitable[None]]

# Slack drops an ack after 3 s; skybot acks within 1 s of receipt (issue 40), this leaving a
# quarter second for Bolt and the network. An action still awaiting (the runner: sudo, then
# Slurm's commands) is acked as "working on it" and its answer follows by response_url.
ACK_DEADLINE_SECONDS = 0.75
# What finding out who asked through Slack (users.info, for the email rule) may take, from
# receipt: Slack's own API slow (5 s was seen) must not bring the ack near Slack's 3 s, so
# past this the ack says "working on it", within 1 s of the request, and the answer follows.
# Few commands wait on it: a match is remembered, a miss not asked again within the hour.
SLACK_CALL_DEADLINE_SECONDS = 0.5
# Answers still being worked on after their ack; kept so the tasks are not collected.
_LATE: set[asyncio.Task[None]] = set()


async def within(work: Awaitable[Reply], deadline: float, late: LateReply, what: str) -> Reply:
    """The answer if it is ready within `deadline` s, else "working on `what`" and `late` later."""
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline))
    if task in done:
        return task.result()

    async def deliver() -> None:
        reply = await task
        try:
            await late(reply)
        except Exception:
            log.exception("could not deliver the late answer to %s", what)

    follow_up = asyncio.create_task(deliver())
    _LATE.add(follow_up)
    follow_up.add_done_callback(_LATE.discard)
    return simple(f"⏳ Working on {what}; the answer will follow here in a moment.")
