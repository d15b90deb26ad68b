"""The cluster lane on Slurm 24.11: every test marked `cluster` runs again, inside the 24.11
sandbox (deploy/testcluster-24.11.sh), on its own Python 3.13, against its real Slurm 24.11.

The tests on the host prove skybot on 22.05; this one runs `pytest -m cluster` inside the
sandbox with this checkout mounted at the same path, streams its output to a log, and fails
with the list of the inner failures. One run at a time: the lane empties the 24.11 queue."""

from __future__ import annotations

import fcntl
import os
import shlex
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "deploy" / "testcluster-24.11.sh"
STATE = Path(os.environ.get("TESTCLUSTER_2411_STATE", "/var/lib/skybot-testcluster-24.11"))
# Inside the sandbox; the host sees it under the rootfs.
INNER_REPORT = "/var/log/skybot-lane/junit.xml"
LOCK = Path("/tmp/skybot-cluster-24.11.lock")
LANE_TIMEOUT = 1500


@contextmanager
def _lane_lock() -> Iterator[None]:
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _outcomes(report: Path) -> dict[str, list[str]]:
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


# The whole lane runs inside this one test: its limit is the lane's, with time to report.
@pytest.mark.timeout(LANE_TIMEOUT + 300)
def test_cluster_lane_passes_on_slurm_24_11(capsys: pytest.CaptureFixture[str]) -> None:
    # The sandbox's `run` sets it: inside, this test would start the lane within itself.
    assert "SKYBOT_TESTCLUSTER" not in os.environ, "the lane must not run inside its own sandbox"
    status = subprocess.run([str(SCRIPT), "status"], capture_output=True, text=True, timeout=60)
    if status.returncode != 0:
        pytest.fail(
            "the Slurm 24.11 test cluster is not up: run `deploy/testcluster-24.11.sh up`\n"
            + status.stdout
            + status.stderr
        )
    log_path = STATE / "lane.log"
    report = STATE / "rootfs" / INNER_REPORT.lstrip("/")
    inner = [
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
        f"--ignore={Path(__file__).relative_to(REPO)}",
        f"--junitxml={INNER_REPORT}",
        "-rfE",
        # e.g. "-k poller -x" to run part of the lane by hand
        *shlex.split(os.environ.get("SKYBOT_24_11_LANE_ARGS", "")),
    ]
    with _lane_lock():
        report.unlink(missing_ok=True)
        started = time.monotonic()
        with log_path.open("w") as log:
            # Streamed, so a hung lane shows how far it got (tail -f the log).
            subprocess.run(
                inner,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=LANE_TIMEOUT,
                check=False,
            )
        seconds = time.monotonic() - started
    if not report.exists():
        tail = log_path.read_text()[-3000:]
        pytest.fail(f"the 24.11 lane left no report; see {log_path}:\n{tail}")
    outcomes = _outcomes(report)
    counts = ", ".join(f"{len(ids)} {kind}" for kind, ids in outcomes.items() if ids)
    with capsys.disabled():
        print(f"\nSlurm 24.11 cluster lane: {counts} in {seconds:.0f} s (log: {log_path})")
    failures = outcomes["failed"] + outcomes["error"]
    assert not failures, f"{len(failures)} failed on Slurm 24.11 (log: {log_path}):\n" + "\n".join(
        failures
    )
    assert outcomes["passed"], f"no test passed on 24.11; see {log_path}"
