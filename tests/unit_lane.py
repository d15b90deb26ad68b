"""The unit tests (every test not marked `cluster`) as a background pytest beside the host's
cluster tests, in a run that selects both.

Cluster tests spend most of their time waiting on Slurm (a job to start, accounting to catch
up), and the unit tests need none of it: run one after the other, as before, a full
`python3 -m pytest` took the sum of both. `conftest.py` starts this lane once the session has
collected `tests/test_unit_lane.py`, takes the unit tests out of its own run, and that test,
run after the host's cluster tests, waits for the lane and reports its failures. One process,
not pytest-xdist workers: the cluster tests beside it (and the 24.11 lane) keep a core.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from tests.lane_2411 import junit_outcomes, junit_seconds

# Outside the checkout, as pytest's own temporary directories are; wiped by each lane.
FOLDER = Path("/tmp/skybot-unit-lane")
REPORT = FOLDER / "junit.xml"
LOG = FOLDER / "lane.log"
LOCK = Path("/tmp/skybot-unit-lane.lock")
UNIT_LANE_TIMEOUT = 900
UNIT_LANE_TEST = "tests/test_unit_lane.py"
UNIT_LANE_KEY = pytest.StashKey["UnitLane"]()


@dataclass
class UnitLaneResult:
    outcomes: dict[str, list[str]]
    seconds: float | None  # the lane's own pytest run, from its report
    log: Path


@dataclass
class UnitLane:
    """A running unit lane: its process and the lock that keeps its folder its own."""

    process: subprocess.Popen[bytes]
    started: float
    _lock: IO[str] | None = field(default=None, repr=False)
    _log_file: IO[bytes] | None = field(default=None, repr=False)

    @classmethod
    def start(cls, paths: list[str], folder: Path) -> UnitLane:
        """`paths`, from `folder`: what the session was given (or its testpaths), so the lane
        runs the unit tests of exactly those."""
        lock = LOCK.open("a")
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second full run would wipe this one's folder
        FOLDER.mkdir(parents=True, exist_ok=True)
        REPORT.unlink(missing_ok=True)
        log_file = LOG.open("wb")
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "not cluster",
            "-p",
            "no:cacheprovider",
            f"--basetemp={FOLDER / 'tmp'}",
            f"--junitxml={REPORT}",
            "-q",
            "-rfE",
            *paths,
        ]
        process = subprocess.Popen(command, cwd=folder, stdout=log_file, stderr=subprocess.STDOUT)
        return cls(process, time.monotonic(), lock, log_file)

    def wait(self) -> UnitLaneResult:
        try:
            remaining = UNIT_LANE_TIMEOUT - (time.monotonic() - self.started)
            try:
                self.process.wait(timeout=max(1.0, remaining))
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            if not REPORT.exists():
                return UnitLaneResult({}, None, LOG)
            return UnitLaneResult(junit_outcomes(REPORT), junit_seconds(REPORT), LOG)
        finally:
            self.close()

    def close(self) -> None:
        """End the lane if it still runs (a session stopped early), and release the lock."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None


def failure_summary(log: Path) -> str:
    """What failed in the lane, as its log tells it: pytest's tracebacks and short summary
    (CI keeps only this session's output, not the lane's log), or the log's tail."""
    text = log.read_text(errors="replace") if log.exists() else ""
    starts = [text.find(f" {section} ") for section in ("ERRORS", "FAILURES")]
    found = [start for start in starts if start >= 0]
    return text[min(found) :][-20_000:] if found else text[-3000:]
