"""What a command answers: plain text plus Block Kit, kept within Slack's limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

# The block builders are core's (notices use them too); re-exported as the commands' kit.
from core.blocks import MAX_SECTION_CHARS as MAX_SECTION_CHARS
from core.blocks import Block as Block
from core.blocks import context as context
from core.blocks import header as header
from core.blocks import section as section
from core.slack_text import clip_markdown
from core.view import ClusterView

MAX_BLOCKS = 50
# Slack truncates a message's fallback text beyond this; keep well inside it.
MAX_TEXT_CHARS = 3500


@dataclass(frozen=True)
class Reply:
    """A command's answer. `text` is the fallback, the console output and the notification text."""

    text: str
    blocks: list[Block] = field(default_factory=list)
    in_channel: bool = False
    # The answer less its freshness lines, for the router to stamp again at another `now`
    # (handlers/commands/common.py `answer()`); not part of what the reply says.
    fresh: Restamp | None = field(default=None, compare=False, repr=False)
    # A modal to open with the command's trigger_id (`/sky submit` with no path: the job
    # form); the listener opens it, and `text` is what is said if it cannot.
    modal: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    def for_slack(self) -> dict[str, Any]:
        """Keyword arguments for Bolt's ack()/respond()."""
        payload: dict[str, Any] = {
            "text": truncate(self.text, MAX_TEXT_CHARS),
            "response_type": "in_channel" if self.in_channel else "ephemeral",
        }
        if self.blocks:
            payload["blocks"] = self.blocks[:MAX_BLOCKS]
        return payload


truncate = clip_markdown


class Restamp(Protocol):
    """An answer less what depends on when it is asked ("as of 12 s ago", a source gone
    stale): `at(view, now)` is the whole answer at `now` over the view it came from."""

    def at(self, view: ClusterView, now: float, in_channel: bool = False) -> Reply: ...


def lines_to_sections(lines: list[str]) -> list[Block]:
    """Pack lines into as few sections as fit 3,000 characters each."""
    blocks: list[Block] = []
    chunk: list[str] = []
    size = 0
    for line in lines:
        line = truncate(line, MAX_SECTION_CHARS)
        if chunk and size + len(line) + 1 > MAX_SECTION_CHARS:
            blocks.append(section("\n".join(chunk)))
            chunk, size = [], 0
        chunk.append(line)
        size += len(line) + 1
    if chunk:
        blocks.append(section("\n".join(chunk)))
    return blocks


def simple(text: str, in_channel: bool = False) -> Reply:
    """A one-section reply whose text and blocks say the same thing."""
    return Reply(text=text, blocks=[section(text)], in_channel=in_channel)
