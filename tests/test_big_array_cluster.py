"""A 5,000-task array whose tasks all end within one poll is one DM to its owner (issue 40),
on the real cluster (22.05 on the host; 24.11 in its lane), through the real bot and the
Slack stand-in. The tasks are held, split into a job record each and cancelled at once
(tests/support/big_array.py says why); the test cluster's MaxArraySize is 5001.

The poll that sees the 5,000 ends is timed too, from skybot's own poll metric, and printed;
its ratio to a quiet poll is checked by benchmarks/big_array_poll.py, not here: on a 2-core
machine shared with other test runs one poll's time says more about the neighbours."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.big_array import TASKS, run_big_array

pytestmark = pytest.mark.cluster


@pytest.mark.timeout(600)
async def test_5000_tasks_ending_within_a_poll_are_one_dm(
    tmp_path: Path, clean_queue: None, capsys: pytest.CaptureFixture[str]
) -> None:
    run = await run_big_array(tmp_path, quiet=1)  # the benchmark takes 3 of each
    (dm,) = run.dms
    assert f"Array job {run.array_id} `big5k` ended: {TASKS} tasks, {TASKS} cancelled." in dm, dm
    if not run.queued or not run.ending:
        return  # a poll's figure missed by the scrape: the figures are the benchmark's
    with capsys.disabled():
        print(
            f"\n{TASKS}-task array: end poll {max(run.ending):.3f} s, quiet polls "
            f"(queued) {[round(s, 3) for s in run.queued]}, (empty) "
            f"{[round(s, 3) for s in run.empty]}, ratio {run.ratio:.2f}x"
        )
