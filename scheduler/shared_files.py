"""Reading small files on shared storage that users (or a careless admin) control.

Weekly disk-usage.txt reports sit in directories users own, and image `.packages` lists in the
admins' image directory; one symlink there must not make skybot read a file it should not, and
a FIFO planted under the name must not hang the poller. So a read refuses symlinks, anything
but a regular file and files over a size cap, each with a `SharedFileError` naming the path;
what the file says is then parsed by core (core/disk_usage.py, core/packages.py).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["SharedFileError", "SharedFileMissing", "read_regular_file", "read_utf8_file"]


class SharedFileError(ValueError):
    """A file on shared storage that cannot be read safely; the message says why."""


class SharedFileMissing(SharedFileError):
    """No such file (yet): e.g. the weekly script has not run since the directory appeared."""


def read_utf8_file(path: Path, max_bytes: int) -> str:
    """The text of a small regular file, read as `read_regular_file` reads it.

    Also refuses text that is not valid UTF-8.
    """
    data = read_regular_file(path, max_bytes)
    try:
        return data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise SharedFileError(f"{path} is not valid UTF-8 (byte {exc.start})") from exc


def read_regular_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of a small regular file, read without following a symlink at `path`.

    Refuses symlinks, anything but a regular file and files over `max_bytes`, each with a
    SharedFileError (SharedFileMissing if there is no file).
    """
    fd = _open_no_follow(path)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SharedFileError(f"{path} is not a regular file")
        if info.st_size > max_bytes:
            raise SharedFileError(f"{path} is {info.st_size} bytes, over the {max_bytes} limit")
        return _read_limited(fd, path, max_bytes)
    except OSError as exc:
        raise SharedFileError(f"cannot read {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)


def _open_no_follow(path: Path) -> int:
    # O_NONBLOCK: opening a FIFO planted under the name must not hang the bot; it is then
    # rejected by the regular-file check. O_NOFOLLOW only guards the last path component.
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags)
    except FileNotFoundError as exc:
        raise SharedFileMissing(f"{path} does not exist") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SharedFileError(f"{path} is a symlink; refusing to follow it") from exc
        raise SharedFileError(f"cannot open {path}: {exc.strerror}") from exc


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
            raise SharedFileError(f"{path} is larger than {max_bytes} bytes")
