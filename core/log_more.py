"""The "Show more of the log" button on failure DMs: what it carries, and what it shows.

A button carries only what is safe to come back: the job's id, which of its output files
(stderr or stdout) and the byte offset the next chunk ends at, as `JOB:STREAM:END`. Slack
does not escape a button's id or value, and anyone who can see a message can send any value
back, so `parse_more_value` accepts nothing else; the click handler
(handlers/buttons/show_more_log.py) checks who clicked, finds the job and its output path in
what skybot stored, and reads the chunk as the job's owner. No path ever travels in a button.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.buttons import (
    CLUSTER_NAME,
    ButtonKind,
    actions_block,
    button,
    split_cluster,
    with_cluster,
)
from core.job_output import STDERR, STDOUT, STREAM_LABELS, OutputTail, TailPart, tail_part

LOG_MORE = "skybot_log_more"
_STREAM = f"(?:{STDERR}|{STDOUT})"
# Block Kit wants action ids unique within a message: the id names the job and the file.
SHOW_MORE_LOG = ButtonKind(
    "Show more of the log", LOG_MORE, rf"(?:{CLUSTER_NAME.pattern}/)?[0-9]{{1,10}}:{_STREAM}"
)
LOG_MORE_PATTERN = SHOW_MORE_LOG.pattern
_VALUE = re.compile(rf"([1-9][0-9]{{0,9}}):({STDERR}|{STDOUT}):([1-9][0-9]{{0,18}})")
# The runner takes offsets below 2**63; a larger one is forged.
MAX_OFFSET = 2**63 - 1
BEGINNING = "That is the beginning of the file."


@dataclass(frozen=True, slots=True)
class MoreRequest:
    """One click's worth: the chunk of `stream` of job `job_id` that ends at byte `end`."""

    job_id: int
    stream: str
    end: int
    cluster: str | None

    @property
    def action_id(self) -> str:
        return SHOW_MORE_LOG.action_id(self.id_suffix)

    @property
    def value(self) -> str:
        return with_cluster(f"{self.job_id}:{self.stream}:{self.end}", self.cluster or "")

    @property
    def id_suffix(self) -> str:
        return with_cluster(f"{self.job_id}:{self.stream}", self.cluster or "")


def parse_more_value(action_id: str, value: str) -> MoreRequest | None:
    """The request a click carries, or None unless id and value are exactly what skybot
    builds, and agree."""
    split = split_cluster(value)
    match = _VALUE.fullmatch(split[1]) if split is not None else None
    if split is None or match is None:
        return None
    request = MoreRequest(int(match[1]), match[2], int(match[3]), split[0])
    if request.end > MAX_OFFSET or request.job_id >= 2**32 or action_id != request.action_id:
        return None
    return request


def more_button(request: MoreRequest, text: str) -> dict[str, Any]:
    return button(SHOW_MORE_LOG, request.id_suffix, text, request.value)


def more_block(cluster: str, job_id: int, parts: Sequence[TailPart]) -> list[dict[str, Any]]:
    """An actions block with a "Show more" button per file with earlier lines, or nothing;
    each names `cluster`, whose job `job_id` is."""
    return actions_block(
        [
            more_button(
                MoreRequest(job_id, part.stream, part.begins_at, cluster),
                f"Show more of {_what(part)}",
            )
            for part in parts
            if part.begins_at is not None
        ]
    )


def show_log_block(cluster: str, job_id: int, stream: str = STDOUT) -> list[dict[str, Any]]:
    """A "Show log" button: its first click shows the file's last lines (the chunk that ends
    at MAX_OFFSET, past any file's end), and each answer has the usual "Show more"."""
    return actions_block(
        [more_button(MoreRequest(job_id, stream, MAX_OFFSET, cluster), "Show log")]
    )


def earlier_chunk(
    request: MoreRequest, tail: OutputTail, one_file: bool, max_lines: int
) -> TailPart:
    """What a click shows: the lines before those a message showed, and whether more exist."""
    label = "Output" if one_file else STREAM_LABELS[request.stream]
    latest = request.end == MAX_OFFSET  # "Show log": the file's last lines
    part = tail_part(request.stream, label, tail, max_lines, earlier=not latest)
    if part.begins_at is None and tail.error is None and tail.size > 0:
        return TailPart(part.stream, part.label, f"{part.markdown}\n{BEGINNING}", None)
    return part


def _what(part: TailPart) -> str:
    return "the log" if part.label == "Output" else part.label
