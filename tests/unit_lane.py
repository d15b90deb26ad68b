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

import sys
from pathlib import Path

import pytest

from tests.background_pytest import BackgroundPytest

# Outside the checkout, as pytest's own temporary directories are; wiped by each lane.
FOLDER = Path("/tmp/skybot-unit-lane")
REPORT = FOLDER / "junit.xml"
LOG = FOLDER / "lane.log"
LOCK = Path("/tmp/skybot-unit-lane.lock")  # a second full run would wipe this one's folder
UNIT_LANE_TIMEOUT = 900
UNIT_LANE_TEST = "tests/test_unit_lane.py"
UNIT_LANE_KEY = pytest.StashKey[BackgroundPytest]()


def start_unit_lane(paths: list[str], folder: Path) -> BackgroundPytest:
    """`paths`, from `folder`: what the session was given (or its testpaths), so the lane
    runs the unit tests of exactly those."""
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
    return BackgroundPytest.start(command, folder, LOG, REPORT, LOCK)


def failure_summary(log: Path) -> str:
    """What failed in the lane, as its log tells it: pytest's tracebacks and short summary
    (CI keeps only this session's output, not the lane's log), or the log's tail."""
    text = log.read_text(errors="replace") if log.exists() else ""
    starts = [text.find(f" {section} ") for section in ("ERRORS", "FAILURES")]
    found = [start for start in starts if start >= 0]
    return text[min(found) :][-20_000:] if found else text[-3000:]
