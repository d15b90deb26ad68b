"""The Slurm 24.11 cluster lane as a background process: every test marked `cluster`, run again
inside deploy/testcluster-24.11.sh's sandbox on its own Python 3.13 and its own Slurm.

The two clusters share nothing (namespaces, ports, munge, users, mounts), so the lane runs
beside the host's tests instead of after them: tests/support/cluster_run.py starts it before the
session's first cluster test when the session selected `test_slurm_24_11_lane.py`, and that
test, run after the host's cluster tests, waits for it and reports."""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.background_pytest import BackgroundPytest, LaneResult
from tests.support.cluster_locks import LANE_LOCK, ClusterBusy, hold

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "testcluster-24.11.sh"
STATE = Path(os.environ.get("TESTCLUSTER_2411_STATE", "/var/lib/skybot-testcluster-24.11"))
# Inside the sandbox; the host sees it under the rootfs.
INNER_REPORT = "/var/log/skybot-lane/junit.xml"
LANE_TIMEOUT = 1500
LANE_TEST = "tests/test_slurm_24_11_lane.py"


@dataclass
class Lane:
    """The lane's run, or why it could not start (the cluster is down, or another run has
    it), to fail its test with."""

    run: BackgroundPytest | None
    problem: str = ""

    @classmethod
    def start(cls) -> Lane:
        status = subprocess.run([str(SCRIPT), "status"], capture_output=True, text=True, timeout=60)
        if status.returncode != 0:
            return cls(
                None,
                "the Slurm 24.11 test cluster is not up: run `deploy/testcluster-24.11.sh up`\n"
                + status.stdout
                + status.stderr,
            )
        try:
            held = hold(LANE_LOCK, "the Slurm 24.11 test cluster")  # each lane empties its queue
        except ClusterBusy as busy:
            return cls(None, str(busy))
        return cls(BackgroundPytest.start(_command(), REPO, STATE / "lane.log", _report(), held))

    def wait(self) -> LaneResult:
        assert self.run is not None, self.problem
        return self.run.wait(LANE_TIMEOUT)

    def close(self) -> None:
        if self.run is not None:
            self.run.close()


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
        "-n",  # one process, as cluster tests are anyway: no pytest-xdist worker to start
        "0",
        "-p",
        "no:cacheprovider",
        f"--ignore={LANE_TEST}",
        f"--junitxml={INNER_REPORT}",
        "-rfE",
        # e.g. "-k poller -x" to run part of the lane by hand
        *shlex.split(os.environ.get("SKYBOT_24_11_LANE_ARGS", "")),
    ]
