"""The `/sky` slash command listener.

The answer is computed from the in-memory snapshot and sent in the ack itself: with the app in
`process_before_response` mode that is one HTTP response (or one Socket Mode ack) well inside
Slack's 3 seconds, and nothing on this path waits for Slurm or the database.
"""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from handlers.commands import command_table
from handlers.router import CommandTable, dispatch
from store.reader import SnapshotCache


def register_listeners(
    app: AsyncApp, cache: SnapshotCache, table: CommandTable | None = None
) -> None:
    commands = table or command_table()

    @app.command("/sky")
    async def sky(ack: AsyncAck, command: dict[str, Any]) -> None:
        reply = dispatch(
            commands,
            cache.current(),
            command.get("text", ""),
            team_id=command.get("team_id", ""),
            user_id=command.get("user_id", ""),
        )
        await ack(**reply.for_slack())
