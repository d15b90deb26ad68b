"""Benchmark: the Slurm poll that sees a 5,000-task array end, against a quiet poll (issue 40:
"a 5,000-task array ending within a poll costs one DM and the poll stays under 2x a quiet
one").

The scenario is tests/test_big_array_cluster.py's (tests/support/big_array.py): skybot run
against the Slack stand-in and the real test cluster, alice's 5,000 tasks held, split into a
job record each and cancelled at once. Each run prints the polls' seconds from skybot's own
`skybot_poll_duration_seconds`: with the cluster empty, with the 5,000 tasks queued (the quiet
poll: nothing changing), and from the scancel to the end DM; then the ratio of the longest of
the last to the median quiet one. Exits 1 if a run's ratio is 2 or more, or it sent other
than one DM. Hold the cluster's lock for the whole run:

    flock -o /tmp/skybot-cluster.lock python3 benchmarks/big_array_poll.py --runs 3
    flock -o /tmp/skybot-cluster-24.11.lock deploy/testcluster-24.11.sh run \\
        python benchmarks/big_array_poll.py --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.big_array import TASKS, run_big_array  # noqa: E402
from tests.support.cluster import scancel_everything  # noqa: E402

LIMIT = 2.0


def _seconds(values: list[float]) -> str:
    return " ".join(f"{v:.3f}" for v in values)


async def run(runs: int, tasks: int) -> int:
    worst = 0.0
    for number in range(1, runs + 1):
        await asyncio.to_thread(scancel_everything)
        with tempfile.TemporaryDirectory(prefix="skybot-big-array-") as tmp:
            result = await run_big_array(Path(tmp), tasks, name=f"big{number}")
        worst = max(worst, result.ratio)
        print(f"run {number}: array {result.array_id}, {len(result.dms)} DM(s)")
        print(f"  polls, cluster empty (s):   {_seconds(result.empty)}")
        print(f"  polls, {tasks} queued (s): {_seconds(result.queued)}")
        print(f"  polls, scancel to DM (s):   {_seconds(result.ending)}")
        quiet = statistics.median(result.queued)
        print(
            f"  the ends' poll {max(result.ending):.3f} s / quiet {quiet:.3f} s = "
            f"{result.ratio:.2f}x (limit {LIMIT:.0f}x)"
        )
        if len(result.dms) != 1:
            print(f"  FAIL: {len(result.dms)} DMs, not 1")
            return 1
    print(f"worst ratio over {runs} run(s): {worst:.2f}x")
    return 1 if worst >= LIMIT else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=TASKS)
    args = parser.parse_args()
    return asyncio.run(run(args.runs, args.tasks))


if __name__ == "__main__":
    sys.exit(main())
