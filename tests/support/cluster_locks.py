"""The test clusters' locks: one test run at a time on each cluster.

Cluster tests cancel every test user's jobs and restart shared daemons, so two runs on one
cluster break each other. A run takes the cluster's lock without waiting: when another run
holds it, the run stops with one line naming the holder. A run started under
`flock -o LOCK python3 -m pytest …` (to queue behind another) finds its lock held by that
`flock`, one of its own ancestors, and goes on.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest

# Another folder only for the tests of this machinery (tests/test_one_run.py).
FOLDER = Path(os.environ.get("SKYBOT_TEST_LOCK_DIR", "/tmp"))
HOST_LOCK = FOLDER / "skybot-cluster.lock"  # deploy/testcluster.sh's cluster (22.05)
LANE_LOCK = FOLDER / "skybot-cluster-24.11.lock"  # deploy/testcluster-24.11.sh's sandbox


class ClusterBusy(Exception):
    """Another run holds a cluster's lock: the message says who, on one line."""


def hold(lock: Path, what: str) -> IO[str] | None:
    """Take `lock` now: the open file that holds it (close it to release), or None when a
    process this one runs under holds it already. ClusterBusy when anyone else does."""
    held = lock.open("a")
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        held.close()
        holder = lock_holder(lock)
        if holder is not None and holder in ancestors(os.getpid()):
            return None
        raise ClusterBusy(
            f"{what} is in use by another test run ({describe(holder)} holds {lock}); "
            f"wait for it, or queue behind it: flock -o {lock} python3 -m pytest …"
        ) from None
    return held


@contextmanager
def holding(lock: Path, what: str) -> Iterator[None]:
    """`lock` held for the block, for a test: another run's hold fails it, on one line."""
    try:
        held, refused = hold(lock, what), ""
    except ClusterBusy as busy:
        held, refused = None, str(busy)
    if refused:  # not inside `except`: the one line alone, without the exception's
        pytest.fail(refused, pytrace=False)
    try:
        yield
    finally:
        if held is not None:
            held.close()


def lock_holder(lock: Path) -> int | None:
    """The process that took the flock on `lock`, from /proc/locks (None if it is gone)."""
    stat = lock.stat()
    inode = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF"; a waiter's line has "->" first.
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == inode:
            return int(fields[4])
    return None


def ancestors(pid: int) -> set[int]:
    """`pid` and every process above it, up to init."""
    found: set[int] = set()
    while pid > 0 and pid not in found:
        found.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        # The command name, in parentheses, may hold spaces: the parent follows the last ")".
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def describe(pid: int | None) -> str:
    if pid is None:
        return "a process"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip()
    except OSError:
        return f"pid {pid}"
    return f"pid {pid}, `{command.decode(errors='replace')[:120]}`"
