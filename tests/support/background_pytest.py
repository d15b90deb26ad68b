"""A pytest run as a background process of a full session: the unit lane (tests/unit_lane.py)
and the Slurm 24.11 lane (tests/support/lane_2411.py) are each one.

Its output streams to a log (so a hung lane shows how far it got), it writes a JUnit report
that its collecting test reads, and it keeps its cluster's lock (tests/support/cluster_locks.py,
taken by its starter) for as long as it runs: a second session starting the same lane would
wipe its report or its cluster's queue."""

from __future__ import annotations

import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO


@dataclass
class LaneResult:
    outcomes: dict[str, list[str]]  # empty when the lane left no report
    # From the lane's start until its test collected it: the host's tests may end long after
    # the lane did. `inner_seconds` is the lane's own pytest run, from its report.
    seconds: float
    log: Path
    inner_seconds: float | None = None


@dataclass
class BackgroundPytest:
    process: subprocess.Popen[bytes]
    log: Path
    report: Path
    started: float
    _lock: IO[str] | None = field(default=None, repr=False)
    _log_file: IO[bytes] | None = field(default=None, repr=False)

    @classmethod
    def start(
        cls, command: Sequence[str], cwd: Path, log: Path, report: Path, held: IO[str] | None
    ) -> BackgroundPytest:
        """Start `command`, which writes its JUnit XML to `report`, keeping `held` (the lock
        its starter took) until it ends."""
        report.unlink(missing_ok=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        log_file = log.open("wb")
        process = subprocess.Popen(command, cwd=cwd, stdout=log_file, stderr=subprocess.STDOUT)
        return cls(process, log, report, time.monotonic(), held, log_file)

    def wait(self, timeout: float) -> LaneResult:
        """Its outcomes once it ends, or is killed `timeout` seconds after it started."""
        try:
            remaining = timeout - (time.monotonic() - self.started)
            try:
                self.process.wait(timeout=max(1.0, remaining))
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            seconds = time.monotonic() - self.started
            if not self.report.exists():
                return LaneResult({}, seconds, self.log)
            return LaneResult(
                junit_outcomes(self.report), seconds, self.log, junit_seconds(self.report)
            )
        finally:
            self.close()

    def close(self) -> None:
        """End the run if it still goes (a session stopped early), and release the lock."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def junit_seconds(report: Path) -> float | None:
    """How long the lane's pytest ran, as its JUnit report says."""
    suite = ET.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    seconds = suite.get("time") if suite is not None else None
    return float(seconds) if seconds else None


def junit_outcomes(report: Path) -> dict[str, list[str]]:
    """Test ids by outcome (passed, failed, error, xfailed, skipped) from pytest's JUnit XML."""
    outcomes: dict[str, list[str]] = {
        "passed": [], "failed": [], "error": [], "xfailed": [], "skipped": []
    }  # fmt: skip
    for case in ET.parse(report).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag: child for child in case}
        if "failure" in kinds:
            outcomes["failed"].append(test_id)
        elif "error" in kinds:
            outcomes["error"].append(test_id)
        elif "skipped" in kinds:
            xfail = kinds["skipped"].get("type") == "pytest.xfail"
            outcomes["xfailed" if xfail else "skipped"].append(test_id)
        else:
            outcomes["passed"].append(test_id)
    return outcomes
