"""The Slurm 24.11 cluster lane as a background process: every test marked `cluster`, run again
inside deploy/testcluster-24.11.sh's sandbox on its own Python 3.13 and its own Slurm.

The two clusters share nothing (namespaces, ports, munge, users, mounts), so the lane runs
beside the host's tests instead of after them: `conftest.py` starts it once the session has
collected `test_slurm_24_11_lane.py`, and that test, run last, waits for it and reports."""

from __future__ import annotations

import fcntl
import os
import shlex
import subprocess
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "deploy" / "testcluster-24.11.sh"
STATE = Path(os.environ.get("TESTCLUSTER_2411_STATE", "/var/lib/skybot-testcluster-24.11"))
# Inside the sandbox; the host sees it under the rootfs.
INNER_REPORT = "/var/log/skybot-lane/junit.xml"
LOCK = Path("/tmp/skybot-cluster-24.11.lock")
LANE_TIMEOUT = 1500
LANE_TEST = "tests/test_slurm_24_11_lane.py"
LANE_KEY = pytest.StashKey["Lane"]()


@dataclass
class LaneResult:
    outcomes: dict[str, list[str]]
    # From the lane's start until its test collected it: the host's tests may end long after
    # the lane did. `inner_seconds` is the lane's own pytest run, from its report.
    seconds: float
    log: Path
    inner_seconds: float | None = None


@dataclass
class Lane:
    """A running lane: its process, its log, and the lock that keeps it the only one."""

    process: subprocess.Popen[bytes] | None
    log: Path
    started: float
    # Why the lane could not start (the cluster is down), to fail its test with.
    problem: str = ""
    _lock: IO[str] | None = field(default=None, repr=False)
    _log_file: IO[bytes] | None = field(default=None, repr=False)

    @classmethod
    def start(cls) -> Lane:
        log = STATE / "lane.log"
        status = subprocess.run([str(SCRIPT), "status"], capture_output=True, text=True, timeout=60)
        if status.returncode != 0:
            problem = (
                "the Slurm 24.11 test cluster is not up: run `deploy/testcluster-24.11.sh up`\n"
                + status.stdout
                + status.stderr
            )
            return cls(None, log, time.monotonic(), problem)
        lock = LOCK.open("a")
        fcntl.flock(lock, fcntl.LOCK_EX)  # one lane at a time: each empties the 24.11 queue
        _report().unlink(missing_ok=True)
        log_file = log.open("wb")
        # Streamed, so a hung lane shows how far it got (tail -f the log).
        process = subprocess.Popen(_command(), cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT)
        return cls(process, log, time.monotonic(), "", lock, log_file)

    def wait(self) -> LaneResult:
        try:
            if self.process is not None:
                remaining = LANE_TIMEOUT - (time.monotonic() - self.started)
                try:
                    self.process.wait(timeout=max(1.0, remaining))
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            report = _report()
            inner = junit_seconds(report) if report.exists() else None
            return LaneResult(self.outcomes(), time.monotonic() - self.started, self.log, inner)
        finally:
            self.close()

    def outcomes(self) -> dict[str, list[str]]:
        report = _report()
        return junit_outcomes(report) if report.exists() else {}

    def close(self) -> None:
        """End the lane if it still runs (a session stopped early), and release the lock."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None


def _report() -> Path:
    return STATE / "rootfs" / INNER_REPORT.lstrip("/")


def _command() -> list[str]:
    return [
        str(SCRIPT),
        "run",
        "env",
        "PYTHONDONTWRITEBYTECODE=1",
        "python",
        "-m",
        "pytest",
        "-m",
        "cluster",
        "-p",
        "no:cacheprovider",
        f"--ignore={LANE_TEST}",
        f"--junitxml={INNER_REPORT}",
        "-rfE",
        # e.g. "-k poller -x" to run part of the lane by hand
        *shlex.split(os.environ.get("SKYBOT_24_11_LANE_ARGS", "")),
    ]


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
