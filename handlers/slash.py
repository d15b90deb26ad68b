"""The `/sky` slash command listener.

Read-only answers are computed from the in-memory snapshot and sent in the ack itself: with
the app in `process_before_response` mode that is one HTTP response (or one Socket Mode ack)
well inside Slack's 3 seconds, and nothing on that path waits for Slurm or the database.
Everything after receipt (who asked, then the answer) runs under one deadline; an answer that
misses it is acked as "working on it" and follows by response_url.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from handlers.click_answers import answer_later
from handlers.commands import command_table
from handlers.reply import Reply, simple
from handlers.router import (
    ACK_DEADLINE_SECONDS,
    CommandTable,
    UsageError,
    dispatch_action_or_read,
    within,
)
from handlers.services import Services
from handlers.slack_input import decode_command_text
from store.reader import SnapshotCache

log = logging.getLogger(__name__)

# (subcommand, seconds): one answered command, for the metrics.
ObserveCommand = Callable[[str, float], None]


def register_listeners(
    app: AsyncApp,
    cache: SnapshotCache,
    services: Services,
    table: CommandTable | None = None,
    observe: ObserveCommand | None = None,
) -> None:
    commands = table or command_table(services.config.template)

    @app.command("/sky")
    async def sky(
        ack: AsyncAck, respond: AsyncRespond, client: AsyncWebClient, command: dict[str, Any]
    ) -> None:
        started = time.perf_counter()
        team_id = command.get("team_id", "")
        user_id = command.get("user_id", "")

        def cluster_user_of(slack_id: str) -> str | None:
            identity = services.identity.lookup(team_id, slack_id)
            return identity.cluster_user if identity is not None else None

        async def late(reply: Reply) -> None:
            if command.get("response_url"):
                what = f"the late answer to {_metric_name(commands, text)!r} from {user_id}"
                await answer_later(
                    respond, reply.for_slack(), user_id=user_id, dm=services.dm, what=what
                )
            else:
                await client.chat_postMessage(channel=user_id, text=reply.text, blocks=reply.blocks)

        try:
            text = decode_command_text(command.get("text", ""), cluster_user_of)
        except UsageError as refusal:
            await ack(**simple(str(refusal)).for_slack())
            return

        async def answer() -> Reply:
            try:
                cluster_user = await services.identity.resolve(team_id, user_id)
            except Exception:
                log.exception("resolving %s/%s to a cluster account failed", team_id, user_id)
                cluster_user = None
            return await dispatch_action_or_read(
                commands,
                cache.current(),
                services,
                text,
                team_id=team_id,
                user_id=user_id,
                cluster_user=cluster_user,
                channel_id=command.get("channel_id", ""),
            )

        # One budget from receipt: resolving who asked (users.info with the SDK's retries, a
        # database write) counts against Slack's 3 s as much as the answer does.
        budget = ACK_DEADLINE_SECONDS - (time.perf_counter() - started)
        name = _metric_name(commands, text)
        what = f"`/sky {name}`" if name != "unknown" else "that"
        reply = await within(answer(), budget, late, what)
        await ack(**reply.for_slack())
        if observe is not None:
            observe(name, time.perf_counter() - started)


def _metric_name(commands: CommandTable, text: str) -> str:
    """The subcommand, or "unknown": a label must not take whatever anyone types."""
    words = text.split()
    name = words[0].lower() if words else "help"
    return name if commands.get(name) is not None else "unknown"
