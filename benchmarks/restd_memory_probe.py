"""Which slurmrestd request grows slurmrestd's memory with many held jobs (24.11 sandbox).

Queues N held jobs (benchmarks/controller_cost.py's, cancelled at the end), then reads, as
skybot's slurmrestd source does, 60 `jobs/state`, 60 `nodes` and 3 whole `jobs`, twice,
printing slurmrestd's RSS after each. WARNING: slurmrestd keeps what a whole read grows it by
(24.11.5, 20,000 held jobs, 2026-12-07: +1.3 to +2.6 GB per whole read, 7.9 -> 17.8 GB over
the run; `jobs/state` and `nodes` grew it by nothing): restart slurmrestd after a run.

    flock -o /tmp/skybot-cluster-24.11.lock deploy/testcluster-24.11.sh run \
        python benchmarks/restd_memory_probe.py 20000
"""

import asyncio
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import controller_cost  # noqa: E402
from job_dm_latency import RESTD_URL, TOKEN, slurmrestd_rss_mb  # noqa: E402

from scheduler.slurm import restd_jobs  # noqa: E402
from scheduler.slurm.restd import RestdClient  # noqa: E402


async def main(held: int) -> None:
    took = controller_cost.submit(held)
    print(f"{len(controller_cost.held_job_ids())} held in {took:.0f} s", flush=True)
    client = RestdClient(RESTD_URL, TOKEN, timeout=300)
    print(f"start: {slurmrestd_rss_mb():.0f} MB", flush=True)
    for round_ in range(2):
        for _ in range(60):
            await restd_jobs.job_states(client)
            await asyncio.sleep(0.5)
        print(f"round {round_}: after 60 jobs/state: {slurmrestd_rss_mb():.0f} MB", flush=True)
        for _ in range(60):
            await client.body("nodes", {}, sink=Path("/tmp/probe-nodes.json"))
        print(f"round {round_}: after 60 nodes: {slurmrestd_rss_mb():.0f} MB", flush=True)
        for number in range(3):
            started = time.monotonic()
            await restd_jobs.whole_jobs_into(client, Path("/tmp/probe-jobs.json"))
            print(
                f"round {round_}: after whole jobs {number + 1} "
                f"({time.monotonic() - started:.1f} s): {slurmrestd_rss_mb():.0f} MB",
                flush=True,
            )
    await client.close()


try:
    asyncio.run(main(int(sys.argv[1])))
finally:
    controller_cost.cancel_all()
