"""The unit tests' lane in a full run: this test collects the background pytest that
`conftest.py` started with the unit tests (tests/unit_lane.py) and fails with its failures.

It runs only in a session that selected both cluster and unit tests by path; any other
session drops it, and runs its unit tests itself."""

from __future__ import annotations

import pytest

from tests.unit_lane import UNIT_LANE_KEY, UNIT_LANE_TIMEOUT, failure_summary

pytestmark = pytest.mark.cluster


@pytest.mark.timeout(UNIT_LANE_TIMEOUT + 120)
def test_unit_tests_pass_beside_the_cluster_tests(
    request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    lane = request.config.stash.get(UNIT_LANE_KEY, None)
    assert lane is not None, "conftest.py collects this test only with the lane started"
    result = lane.wait(UNIT_LANE_TIMEOUT)
    if not result.outcomes:
        summary = failure_summary(result.log)
        pytest.fail(f"the unit lane left no report; see {result.log}:\n{summary}")
    counts = ", ".join(f"{len(ids)} {kind}" for kind, ids in result.outcomes.items() if ids)
    with capsys.disabled():
        ran = f" in {result.inner_seconds:.0f} s" if result.inner_seconds is not None else ""
        print(f"\nunit tests, beside the cluster tests: {counts}{ran} (log: {result.log})")
    failures = result.outcomes["failed"] + result.outcomes["error"]
    assert not failures, (
        f"{len(failures)} unit tests failed (log: {result.log}):\n{failure_summary(result.log)}"
    )
    assert result.outcomes["passed"], f"no unit test passed; see {result.log}"
