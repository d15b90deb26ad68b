"""What a DM standing for many jobs says of the ones that went wrong (pure functions).

An array's end DM (core/array_notices.py) and the summary of a burst of ends
(core/summary_notices.py) both name every failed job or task with its exit code, grouped so
that 3,000 tasks failing the same way read as one line of id ranges, and offer a "Show log"
button for the first few (read as the clicker, who must own the job, on click).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from core.blocks import Block
from core.buttons import actions_block
from core.job_facts import exit_words
from core.job_output import STDERR, STDOUT
from core.log_more import MAX_OFFSET, MoreRequest, more_button
from core.records import Job

# "Show log" buttons in one message: Slack allows 25 elements in one actions block.
MAX_LOG_BUTTONS = 10
_TASK_TEXT = re.compile(r"[0-9]+(?:-[0-9]+(?::[0-9]+)?)?")

_STATE_WORDS = {
    "COMPLETED": "completed",
    "FAILED": "failed",
    "TIMEOUT": "timed out",
    "OUT_OF_MEMORY": "out of memory",
    "CANCELLED": "cancelled",
    "NODE_FAIL": "node failure",
    "BOOT_FAIL": "boot failure",
    "DEADLINE": "deadline",
    "PREEMPTED": "preempted",
}


def state_words(state: str) -> str:
    return _STATE_WORDS.get(state, state.lower().replace("_", " "))


def task_ids(text: str | None) -> list[int]:
    """The task ids Slurm's array task text names: `7`, `0-9`, `1,3,5-7%4`, `0-10:2`; []
    for what is not one (a task text Slurm gave as something else counts as no task)."""
    if not text:
        return []
    ids: list[int] = []
    for part in text.split("%", 1)[0].split(","):
        if not _TASK_TEXT.fullmatch(part):
            return []
        first, _, rest = part.partition("-")
        last, _, step = rest.partition(":")
        start, stop = int(first), int(last or first)
        if stop - start > 10_000_000:
            return []
        ids.extend(range(start, stop + 1, int(step or 1) or 1))
    return ids


def id_ranges(ids: Iterable[int], most: int = 40) -> str:
    """`3, 7-9, 12`: sorted ids with runs joined, at most `most` runs (then "and N more")."""
    ordered = sorted(set(ids))
    runs: list[tuple[int, int]] = []
    for value in ordered:
        if runs and value == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))
    shown = [str(a) if a == b else f"{a}-{b}" for a, b in runs[:most]]
    hidden = sum(b - a + 1 for a, b in runs[most:])
    return ", ".join(shown) + (f" and {hidden} more" if hidden else "")


def failure_lines(
    ended: Sequence[tuple[int, str, Job]], named: Callable[[str], str], most_lines: int = 8
) -> list[str]:
    """One line per way of ending other than completing: "failed with exit code 3: 5, 17,
    101-102". `ended` is (id shown, final state, record); `named(ranges)` says what the ids
    are ("tasks 5, 17")."""
    groups: dict[tuple[str, str], list[int]] = {}
    for shown_id, state, job in ended:
        if state == "COMPLETED":
            continue
        how = state_words(state)
        if state in ("FAILED", "OUT_OF_MEMORY", "NODE_FAIL", "TIMEOUT") or job.exit_code:
            how = f"{how} with {exit_words(job)}"
        groups.setdefault((state, how), []).append(shown_id)
    ordered = sorted(groups.items(), key=lambda item: (item[0][0] == "CANCELLED", -len(item[1])))
    lines = [f"{how}: {named(id_ranges(ids))}" for (_, how), ids in ordered[:most_lines]]
    rest = sum(len(ids) for _, ids in ordered[most_lines:])
    if rest:
        lines.append(f"and {rest} more that ended other ways")
    return lines


def log_buttons(
    jobs: Sequence[tuple[str, Job]], cluster: str | None, most: int = MAX_LOG_BUTTONS
) -> list[Block]:
    """A "Show log of X" button for each of the first `most` jobs ((label, record)): the
    file's last lines, then "Show more", read as the clicker (who must own the job). None
    for `cluster`: skybot reads no output there, and offers no button."""
    if cluster is None:
        return []
    buttons: list[dict[str, Any]] = []
    seen: set[int] = set()
    for label, job in jobs:
        if job.job_id in seen or len(buttons) >= most:
            continue
        seen.add(job.job_id)
        stream = STDERR if job.std_err else STDOUT
        request = MoreRequest(job.job_id, stream, MAX_OFFSET, cluster)
        buttons.append(more_button(request, f"Show log of {label}"))
    return actions_block(buttons)
