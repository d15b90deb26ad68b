"""Read the weekly disk-usage.txt files that sit in every user directory on shared storage.

The files live in directories users own, so both the reading and the parsing are strict:
a symlink could point the bot at a file it should not read (or a FIFO that blocks it), and
a user can write anything into the file. Anything not exactly in the admins' format is
rejected with a `DiskUsageError` rather than guessed at. The format (skynet user guide):

    Updated: 2020-11-21 15:04
    Usage (human-readable): 127.2G
    Usage (K): 133284169
"""

from __future__ import annotations

import errno
import os
import re
import stat
from datetime import datetime
from pathlib import Path

from core.records import DirectoryUsage

__all__ = [
    "DiskUsageError",
    "DiskUsageFileMissing",
    "parse_disk_usage",
    "read_disk_usage_file",
    "read_regular_file",
]


class DiskUsageError(ValueError):
    """A disk-usage.txt that cannot be read safely or is not in the expected format."""


class DiskUsageFileMissing(DiskUsageError):
    """No disk-usage.txt (yet): the weekly script has not run since the directory appeared."""


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


def _open_no_follow(path: Path) -> int:
    # O_NONBLOCK: opening a FIFO planted under the name must not hang the bot; it is then
    # rejected by the regular-file check. O_NOFOLLOW only guards the last path component.
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags)
    except FileNotFoundError as exc:
        raise DiskUsageFileMissing(f"{path} does not exist") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DiskUsageError(f"{path} is a symlink; refusing to follow it") from exc
        raise DiskUsageError(f"cannot open {path}: {exc.strerror}") from exc


def _read_limited(fd: int, path: Path, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(65536, max_bytes + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:  # it grew after fstat, or fstat lied (e.g. procfs)
            raise DiskUsageError(f"{path} is larger than {max_bytes} bytes")


def read_disk_usage_file(path: Path, max_bytes: int) -> str:
    """The text of a disk-usage.txt, read without following a symlink at `path`.

    Refuses symlinks, anything but a regular file, files over `max_bytes` and text that is
    not valid UTF-8, each with a DiskUsageError (DiskUsageFileMissing if there is no file).
    """
    data = read_regular_file(path, max_bytes)
    try:
        return data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise DiskUsageError(f"{path} is not valid UTF-8 (byte {exc.start})") from exc


def read_regular_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of a small regular file on shared storage, read without following a symlink.

    Refuses symlinks, anything but a regular file and files over `max_bytes`, each with a
    DiskUsageError (DiskUsageFileMissing if there is no file). Also reads image .packages
    lists, which need their own per-line decoding.
    """
    fd = _open_no_follow(path)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DiskUsageError(f"{path} is not a regular file")
        if info.st_size > max_bytes:
            raise DiskUsageError(f"{path} is {info.st_size} bytes, over the {max_bytes} limit")
        return _read_limited(fd, path, max_bytes)
    except OSError as exc:
        raise DiskUsageError(f"cannot read {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
