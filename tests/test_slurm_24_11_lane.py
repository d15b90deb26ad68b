"""The cluster lane on Slurm 24.11: every test marked `cluster` runs again, inside the 24.11
sandbox (deploy/testcluster-24.11.sh), on its own Python 3.13, against its real Slurm 24.11.

The tests on the host prove skybot on 22.05; this one collects the lane that started in the
background before the session's first cluster test (tests/support/cluster_run.py and
lane_2411.py) and fails with the list of the inner failures. Run under pytest-xdist, what it
prints goes to the JUnit report (`lane` property) rather than the terminal."""

from __future__ import annotations

import os

import pytest

from tests.support import cluster_run
from tests.support.lane_2411 import LANE_TIMEOUT

pytestmark = pytest.mark.cluster


# The whole lane runs behind this one test: its limit is the lane's, with time to report.
@pytest.mark.timeout(LANE_TIMEOUT + 300)
def test_cluster_lane_passes_on_slurm_24_11(
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
    record_property: pytest.RecordProperty,
) -> None:
    # The sandbox's `run` sets it: inside, this test would start the lane within itself.
    assert "SKYBOT_TESTCLUSTER" not in os.environ, "the lane must not run inside its own sandbox"
    lane = cluster_run.lane(request.config)
    if lane.problem:
        pytest.fail(lane.problem, pytrace=False)
    result = lane.wait()
    if not result.outcomes:
        tail = result.log.read_text(errors="replace")[-3000:]
        pytest.fail(f"the 24.11 lane left no report; see {result.log}:\n{tail}")
    counts = ", ".join(f"{len(ids)} {kind}" for kind, ids in result.outcomes.items() if ids)
    ran = f"in {result.inner_seconds:.0f} s, " if result.inner_seconds is not None else ""
    summary = (
        f"Slurm 24.11 cluster lane: {counts} {ran}collected {result.seconds:.0f} s after "
        f"it started (log: {result.log})"
    )
    record_property("lane", summary)
    with capsys.disabled():
        print(f"\n{summary}")
    failures = result.outcomes["failed"] + result.outcomes["error"]
    assert not failures, (
        f"{len(failures)} failed on Slurm 24.11 (log: {result.log}):\n" + "\n".join(failures)
    )
    assert result.outcomes["passed"], f"no test passed on 24.11; see {result.log}"
