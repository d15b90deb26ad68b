"""The Block Kit pieces every message skybot posts is built from, kept within Slack's limits.

Command answers (handlers/reply.py), notices (core/job_notices.py, core/storage_alerts.py) and
the digest all use these, so a block is shaped and clipped the same way wherever it is built.
"""

from __future__ import annotations

from typing import Any

from core.slack_text import clip_markdown, fenced_code

Block = dict[str, Any]

# Slack's limits on one block's text.
MAX_SECTION_CHARS = 3000
MAX_HEADER_CHARS = 150
# A code block's fences, counted against a section's 3,000 characters.
FENCE = "```"


def section(markdown: str) -> Block:
    return {
        "type": "section",
        "text": {"type": "mrkdwn", "text": clip_markdown(markdown, MAX_SECTION_CHARS)},
    }


def context(markdown: str) -> Block:
    return {
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": clip_markdown(markdown, MAX_SECTION_CHARS)}],
    }


def header(text: str) -> Block:
    return {
        "type": "header",
        "text": {"type": "plain_text", "text": clip_markdown(text, MAX_HEADER_CHARS)},
    }


def code_sections(code: str) -> list[Block]:
    """The code in as few fenced sections as fit Slack's 3,000 characters each.

    A section cut in two would break copying, so cuts fall between lines; every template
    skybot writes fits one section (the tests check the longest), this only guards the limit.
    """
    room = MAX_SECTION_CHARS - 2 * len(FENCE) - 2
    chunks: list[list[str]] = [[]]
    size = 0
    for line in fenced_code(code).rstrip("\n").split("\n"):
        if chunks[-1] and size + len(line) + 1 > room:
            chunks.append([])
            size = 0
        chunks[-1].append(line[:room])
        size += len(line[:room]) + 1
    return [section(f"{FENCE}\n" + "\n".join(chunk) + f"\n{FENCE}") for chunk in chunks]
