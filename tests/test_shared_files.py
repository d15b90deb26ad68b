"""scheduler.shared_files: reading user-controlled files on shared storage without being fooled
by a symlink, a FIFO or a huge file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.disk_usage import parse_disk_usage
from scheduler.shared_files import SharedFileError, SharedFileMissing, read_utf8_file

# The example from the skynet user guide.
GOOD = "Updated: 2020-11-21 15:04\nUsage (human-readable): 127.2G\nUsage (K): 133284169\n"


def write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


def test_reads_a_regular_file(tmp_path: Path) -> None:
    path = write(tmp_path / "disk-usage.txt", GOOD.encode())
    assert read_utf8_file(path, max_bytes=4096) == GOOD


def test_symlink_is_refused(tmp_path: Path) -> None:
    secret = write(tmp_path / "secret", GOOD.encode())
    link = tmp_path / "disk-usage.txt"
    link.symlink_to(secret)
    with pytest.raises(SharedFileError, match="symlink"):
        read_utf8_file(link, max_bytes=4096)


def test_dangling_symlink_is_refused_not_missing(tmp_path: Path) -> None:
    link = tmp_path / "disk-usage.txt"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(SharedFileError, match="symlink") as info:
        read_utf8_file(link, max_bytes=4096)
    assert not isinstance(info.value, SharedFileMissing)


def test_oversized_file_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "disk-usage.txt", GOOD.encode() + b"\n" * 5000)
    with pytest.raises(SharedFileError, match="over the 4096 limit"):
        read_utf8_file(path, max_bytes=4096)


def test_file_exactly_at_the_limit_is_read(tmp_path: Path) -> None:
    content = GOOD.encode()
    path = write(tmp_path / "disk-usage.txt", content)
    assert read_utf8_file(path, max_bytes=len(content)) == GOOD


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SharedFileMissing, match="does not exist"):
        read_utf8_file(tmp_path / "disk-usage.txt", max_bytes=4096)


def test_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "disk-usage.txt").mkdir()
    with pytest.raises(SharedFileError, match="not a regular file"):
        read_utf8_file(tmp_path / "disk-usage.txt", max_bytes=4096)


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "disk-usage.txt"
    os.mkfifo(fifo)
    with pytest.raises(SharedFileError, match="not a regular file"):
        read_utf8_file(fifo, max_bytes=4096)


def test_invalid_utf8_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "disk-usage.txt", b"Updated: \xff\xfe 2020\n")
    with pytest.raises(SharedFileError, match="not valid UTF-8"):
        read_utf8_file(path, max_bytes=4096)


def test_read_then_parse(tmp_path: Path) -> None:
    path = write(tmp_path / "disk-usage.txt", GOOD.encode())
    text = read_utf8_file(path, max_bytes=4096)
    usage = parse_disk_usage(text, "/srv/share", "ewijmans3", "/srv/share/ewijmans3")
    assert usage.kib == 133284169
