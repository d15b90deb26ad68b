"""The Block Kit pieces every message skybot posts is built from, kept within Slack's limits.

Command answers (handlers/reply.py), notices (core/job_notices.py, core/storage_alerts.py) and
the digest all use these, so a block is shaped and clipped the same way wherever it is built.
"""

from __future__ import annotations

from typing import Any

from core.slack_text import clip_markdown

Block = dict[str, Any]

# Slack's limits on one block's text.
MAX_SECTION_CHARS = 3000
MAX_HEADER_CHARS = 150


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
