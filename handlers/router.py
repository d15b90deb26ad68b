"""Turning `/sky …` text into a Reply: tokenising, choosing the subcommand, and the safety net.

Every input gets an answer. Unknown subcommands get a suggestion; a bug in a subcommand gets an
apology in Slack and a traceback in the log, never in the user's face.
"""

from __future__ import annotations

import difflib
import logging
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass

from core.view import ClusterView
from handlers.reply import Reply, simple

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CommandRequest:
    """One `/sky` invocation, already split into words."""

    team_id: str
    user_id: str
    args: tuple[str, ...]
    here: bool = False
    # The asker's cluster account, when skybot knows it.
    cluster_user: str | None = None
    # When the command arrived (epoch seconds), for "as of 12 s ago".
    now: float = 0.0


class UsageError(Exception):
    """Bad input: the message is shown to the user as it is."""


CommandFunction = Callable[[CommandRequest, ClusterView], Reply]


@dataclass(frozen=True)
class Command:
    name: str
    usage: str
    summary: str
    run: CommandFunction
    details: str = ""


class CommandTable:
    def __init__(self) -> None:
        self._commands: dict[str, Command] = {}

    def add(self, command: Command) -> None:
        self._commands[command.name] = command

    def get(self, name: str) -> Command | None:
        return self._commands.get(name)

    def all(self) -> list[Command]:
        return list(self._commands.values())

    def suggest(self, name: str) -> str | None:
        # difflib is quadratic: a pasted essay must not stall the event loop.
        close = difflib.get_close_matches(name[:40], self._commands, n=1, cutoff=0.6)
        return close[0] if close else None


def split_words(text: str) -> tuple[list[str], bool]:
    """Words of the command text, and whether `--here` asked for a public answer."""
    try:
        words = shlex.split(text)
    except ValueError as error:
        raise UsageError(f"I could not read that command ({error}). Check your quotes.") from None
    here = "--here" in words
    return [w for w in words if w != "--here"], here


def dispatch(
    table: CommandTable,
    view: ClusterView,
    text: str,
    *,
    team_id: str,
    user_id: str,
    cluster_user: str | None = None,
    now: float | None = None,
) -> Reply:
    """Answer one `/sky` command. Never raises."""
    try:
        words, here = split_words(text)
        name = words[0].lower() if words else "help"
        command = table.get(name)
        if command is None:
            hint = table.suggest(name)
            maybe = f" Did you mean `/sky {hint}`?" if hint else ""
            return simple(f"`{_clip(name)}` is not a skybot command.{maybe} Try `/sky help`.")
        request = CommandRequest(
            team_id,
            user_id,
            tuple(words[1:]),
            here,
            cluster_user,
            time.time() if now is None else now,
        )
        reply = command.run(request, view)
        return Reply(reply.text, reply.blocks, in_channel=here)
    except UsageError as error:
        return simple(str(error))
    except Exception:
        log.exception("command %r from %s/%s failed", text[:200], team_id, user_id)
        return simple(
            "Sorry, skybot hit an internal error answering that. "
            "The admins can find the details in skybot's log."
        )


def _clip(word: str, limit: int = 40) -> str:
    cleaned = word.replace("`", "'")
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"
