"""Parse the weekly disk-usage.txt files that sit in every user directory on shared storage.

A user can write anything into the file, so parsing is strict: anything not exactly in the
admins' format is rejected with a `DiskUsageError` rather than guessed at. (Reading the file,
which is as careful, is the storage poller's: scheduler/shared_files.py.) The format
(skynet user guide):

    Updated: 2020-11-21 15:04
    Usage (human-readable): 127.2G
    Usage (K): 133284169
"""

from __future__ import annotations

import re
from datetime import datetime

from core.records import DirectoryUsage

__all__ = ["MAX_KIB", "DiskUsageError", "parse_disk_usage"]


class DiskUsageError(ValueError):
    """A disk-usage.txt that is not in the expected format; the message says where."""


_UPDATED = "Updated"
_HUMAN = "Usage (human-readable)"
_KIB = "Usage (K)"

# One pattern per key; a line must match one of them exactly.
_LINE_PATTERNS: dict[str, re.Pattern[str]] = {
    _UPDATED: re.compile(r"Updated: (?P<value>\d{4}-\d{2}-\d{2} \d{2}:\d{2})"),
    _HUMAN: re.compile(r"Usage \(human-readable\): (?P<value>\d+(?:\.\d+)?[KMGTPEZY]?)"),
    _KIB: re.compile(r"Usage \(K\): (?P<value>\S+)"),
}


def _parse_updated(value: str) -> datetime:
    try:
        return datetime.strptime(value, "%Y-%m-%d %H:%M")
    except ValueError as exc:
        raise DiskUsageError(f"'{_UPDATED}' is not a valid date and time: {value!r}") from exc


# The most a report may claim: its size in bytes must still fit SQLite's signed 64-bit
# integers (8 EiB, far beyond any filesystem), or storing it would fail every lab's snapshot.
MAX_KIB = (2**63 - 1) // 1024


def _parse_kib(value: str) -> int:
    if not value.isascii() or not value.isdigit():
        raise DiskUsageError(f"'{_KIB}' must be a non-negative integer, got {value!r}")
    if len(value) > 20 or int(value) > MAX_KIB:
        raise DiskUsageError(f"'{_KIB}' is out of range: {value[:30]!r} is over {MAX_KIB}")
    return int(value)


def _match_line(line: str, line_no: int) -> tuple[str, str]:
    """(key, value) of one non-blank line; DiskUsageError if it is not one of the three."""
    for key, pattern in _LINE_PATTERNS.items():
        match = pattern.fullmatch(line)
        if match:
            return key, match["value"]
    shown = line if len(line) <= 80 else line[:77] + "..."
    raise DiskUsageError(f"line {line_no} is not in the disk-usage.txt format: {shown!r}")


def parse_disk_usage(text: str, root: str, owner: str, path: str) -> DirectoryUsage:
    """Parse one disk-usage.txt; `root`, `owner` and `path` say whose directory it is.

    Exactly the three keys, each once, in any order; blank lines (and trailing whitespace,
    including Windows line ends) are tolerated; anything else is a DiskUsageError.
    """
    values: dict[str, str] = {}
    for line_no, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.rstrip()
        if not line:
            continue
        key, value = _match_line(line, line_no)
        if key in values:
            raise DiskUsageError(f"'{key}' appears more than once (line {line_no})")
        values[key] = value
    missing = [key for key in _LINE_PATTERNS if key not in values]
    if missing:
        raise DiskUsageError("missing " + ", ".join(f"'{key}'" for key in missing))
    return DirectoryUsage(
        root=root,
        owner=owner,
        path=path,
        updated=_parse_updated(values[_UPDATED]),
        kib=_parse_kib(values[_KIB]),
        human=values[_HUMAN],
    )
