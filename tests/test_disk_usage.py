"""core.disk_usage: strict parsing of disk-usage.txt (reading it: test_shared_files.py)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from core.disk_usage import MAX_KIB, DiskUsageError, parse_disk_usage
from core.records import DirectoryUsage
from store.caps_and_storage import save_storage
from store.db import open_db
from store.snapshots import load_snapshot
from tests.support.factories import CLUSTER

# The example from the skynet user guide.
GOOD = "Updated: 2020-11-21 15:04\nUsage (human-readable): 127.2G\nUsage (K): 133284169\n"


def parse(text: str) -> DirectoryUsage:
    return parse_disk_usage(text, root="/srv/share", owner="ewijmans3", path="/srv/share/ewijmans3")


def test_good_file() -> None:
    usage = parse(GOOD)
    assert usage == DirectoryUsage(
        root="/srv/share",
        owner="ewijmans3",
        path="/srv/share/ewijmans3",
        updated=datetime(2020, 11, 21, 15, 4),
        kib=133284169,
        human="127.2G",
    )
    assert usage.bytes == 133284169 * 1024


@pytest.mark.parametrize(
    "text",
    [
        GOOD.rstrip("\n"),  # no final newline
        "\n\n" + GOOD.replace("\n", "\n\n") + "\n",  # blank lines anywhere
        GOOD.replace("\n", "\r\n"),  # written on Windows
        "Usage (K): 133284169\nUpdated: 2020-11-21 15:04\nUsage (human-readable): 127.2G\n",
    ],
)
def test_tolerated_variations(text: str) -> None:
    usage = parse(text)
    assert (usage.kib, usage.human) == (133284169, "127.2G")


@pytest.mark.parametrize(
    ("human", "kib"), [("0", "0"), ("4.0K", "4"), ("512", "1"), ("1.5T", "1610612736")]
)
def test_other_sizes(human: str, kib: str) -> None:
    text = f"Updated: 2024-01-02 03:04\nUsage (human-readable): {human}\nUsage (K): {kib}\n"
    usage = parse(text)
    assert (usage.human, usage.kib) == (human, int(kib))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "missing 'Updated', 'Usage \\(human-readable\\)', 'Usage \\(K\\)'"),
        ("\x00\x01binary garbage\xff", "line 1 is not in the disk-usage.txt format"),
        ("rm -rf /\n" + GOOD, "line 1 is not in the disk-usage.txt format"),
        (GOOD.replace("Usage (K): 133284169\n", ""), "missing 'Usage \\(K\\)'"),
        (GOOD.replace("Updated: 2020-11-21 15:04\n", ""), "missing 'Updated'"),
        (GOOD.replace("133284169", "-133284169"), "must be a non-negative integer"),
        (GOOD.replace("133284169", "12.5"), "must be a non-negative integer"),
        (GOOD.replace("133284169", "1e9"), "must be a non-negative integer"),
        (GOOD.replace("133284169", "१२३"), "must be a non-negative integer"),
        (GOOD.replace("127.2G", "lots"), "line 2 is not in the disk-usage.txt format"),
        (GOOD.replace("2020-11-21", "2020-13-45"), "not a valid date"),
        (GOOD.replace("15:04", "3pm"), "line 1 is not in the disk-usage.txt format"),
        (GOOD + "Note: please clean up\n", "line 4 is not in the disk-usage.txt format"),
        (GOOD + "Usage (K): 1\n", "'Usage \\(K\\)' appears more than once"),
        ("  " + GOOD, "line 1 is not in the disk-usage.txt format"),  # leading space
        (GOOD.replace("Usage (K): ", "Usage (K):"), "line 3 is not in the disk-usage.txt format"),
        (GOOD.replace("Updated", "updated"), "line 1 is not in the disk-usage.txt format"),
    ],
)
def test_rejects_anything_else(text: str, message: str) -> None:
    with pytest.raises(DiskUsageError, match=message):
        parse(text)


@pytest.mark.parametrize("kib", [str(MAX_KIB + 1), str(2**63), str(2**64), "9" * 400])
def test_usage_too_large_for_sqlite_is_refused(kib: str) -> None:
    with pytest.raises(DiskUsageError, match="out of range"):
        parse(GOOD.replace("133284169", kib))


def test_largest_usage_is_stored(tmp_path: Path) -> None:
    usage = parse(GOOD.replace("133284169", str(MAX_KIB)))
    db = open_db(tmp_path / "s.db")
    save_storage(db, CLUSTER, [usage], [], at=1.0)
    assert load_snapshot(db, CLUSTER).directories[0].bytes == MAX_KIB * 1024 < 2**63


def test_long_garbage_line_is_shortened_in_the_message() -> None:
    with pytest.raises(DiskUsageError) as info:
        parse("x" * 10_000)
    assert len(str(info.value)) < 200
