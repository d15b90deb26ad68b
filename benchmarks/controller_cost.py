"""Benchmark: what one poll's job query costs the real controller, before and after.

Against the cluster this runs on (the host's 22.05 one, or the 24.11 sandbox through
`deploy/testcluster-24.11.sh run`): submit N held jobs as alice, then for each way of
asking for the jobs, reset `sdiag`, run the query --reads times, and report slurmctld's own
RPC time per poll (sdiag's total_time / count for the RPC), the wall time of the command,
its output size, and that wall time as a share of a 15 s poll interval. Then every held
job is cancelled. Before: `squeue --all --json` (every record). After, where squeue has it
(24.05+): `squeue --all --only-job-state --json` (ids and states; records are then fetched
only for the jobs that changed). Needs the cluster lock and MaxJobCount above N:

    flock /tmp/skybot-cluster.lock deploy/testcluster-24.11.sh run \\
        python benchmarks/controller_cost.py --jobs 2000
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time

NAME = "skybot-controller-cost"
WAYS = {
    "before: squeue --all --json": ["squeue", "--all", "--json"],
    "after: squeue --all --only-job-state --json": [
        "squeue",
        "--all",
        "--only-job-state",
        "--json",
    ],
}
INTERVAL = 15.0


def submit(jobs: int) -> None:
    script = (
        f"seq {jobs} | xargs -P 4 -I{{}} sbatch --hold --parsable -p hoffman-lab "
        f"-A hoffman-lab -J {NAME} --output=/dev/null --chdir=/tmp --wrap true > /dev/null"
    )
    subprocess.run(["runuser", "-u", "alice", "--", "sh", "-c", script], check=True)


def rpc_stats() -> dict[str, tuple[int, int]]:
    """sdiag's (count, total microseconds) per RPC message type."""
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    section = out.split("Remote Procedure Call statistics by message type", 1)[-1]
    section = section.split("Remote Procedure Call statistics by user", 1)[0]
    return {
        m.group(1): (int(m.group(2)), int(m.group(3)))
        for m in re.finditer(
            r"^\s*(\w+)\s+\(\s*\d+\) count:(\d+)\s+ave_time:\d+\s+total_time:(\d+)", section, re.M
        )
    }


def measure(command: list[str], reads: int) -> dict[str, float] | None:
    subprocess.run(["sdiag", "--reset"], capture_output=True, check=True)
    started = time.perf_counter()
    size = 0
    for _ in range(reads):
        done = subprocess.run(command, capture_output=True)
        if done.returncode != 0:
            return None  # this squeue does not have it
        size = len(done.stdout)
    wall = (time.perf_counter() - started) / reads
    stats = {k: v for k, v in rpc_stats().items() if k.startswith("REQUEST_JOB")}
    rpc_us = sum(total for _, total in stats.values()) / reads
    return {"wall_s": wall, "rpc_ms": rpc_us / 1000, "mb": size / 1e6, "rpcs": ",".join(stats)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--reads", type=int, default=5)
    args = parser.parse_args()
    try:
        submit(args.jobs)
        listed = subprocess.run(
            ["squeue", "--all", "-h", "-n", NAME], capture_output=True, text=True, check=True
        ).stdout.count("\n")
        rows = {name: measure(command, args.reads) for name, command in WAYS.items()}
    finally:
        subprocess.run(["scancel", "-n", NAME], check=False)
    print(f"{listed:,} held jobs; {args.reads} reads each; share of a {INTERVAL:g} s interval")
    print(f"{'':46}{'wall s':>9}{'RPC ms':>9}{'MB':>8}{'share':>8}  RPC")
    for name, row in rows.items():
        if row is None:
            print(f"{name:46}  (not in this Slurm)")
            continue
        print(
            f"{name:46}{row['wall_s']:>9.3f}{row['rpc_ms']:>9.2f}{row['mb']:>8.2f}"
            f"{row['wall_s'] / INTERVAL:>8.1%}  {row['rpcs']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
