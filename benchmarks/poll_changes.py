"""Benchmark: a poll whose cost follows what changed (24.x), next to today's full poll.

A 100,000-job, 10,000-node cluster in 24.x's shape (data_parser v0.0.42, cloned from the
recorded fixtures by benchmarks/parse_and_store.py's generator), 2% of its jobs changing
state between polls. Each way of polling runs in a fresh child process (peak RSS is its
own), doing what the poll worker and the store's writer do with the commands' output files:

  * full poll, as before issue 17: `squeue --json` of every job decoded, parsed and the
    snapshot replaced (save_slurm_poll);
  * full poll, digested: the same file through the poll worker's digester, only changes
    written (what 22.05 does now);
  * states-only poll (24.05+): `squeue --only-job-state --json` (every job's id and state),
    then `squeue --json --jobs=...` for the 2% that changed; the first poll fetches every
    record, in command-line sized lists, as the poller does.

And the 22.05 full poll of 10,000 jobs / 1,000 nodes, before and now. Targets (issue 17):
24.x steady poll <= 1.5 s and peak RSS <= 300 MB; 22.05 full poll <= 1 s and <= 150 MB.

    python3 benchmarks/poll_changes.py [--jobs 100000] [--nodes 10000] [--changed 0.02]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from parse_and_store import _peak_rss_kib, synthetic_documents  # noqa: E402

STEADY_POLLS = 3
# Ids per `squeue --jobs=` call: what fits in the poller's 100,000-character argument.
IDS_PER_CALL = 100_000 // 7
STATES = ("RUNNING", "COMPLETING", "PENDING")


def _state_entry(job: dict[str, Any]) -> dict[str, Any]:
    return {
        key: job[key]
        for key in ("job_id", "array_job_id", "array_task_id", "job_state")
        if key in job
    }


def write_polls(folder: Path, jobs: int, nodes: int, changed: float) -> None:
    """Files for each poll: states.json, squeue-N.json (records fetched), squeue.json (all
    records, for the full poll), nodes.json, sacct.json."""
    documents = synthetic_documents("v0.0.42", jobs, nodes)
    squeue = json.loads(documents.pop("squeue"))
    rng = random.Random(17)
    ids = [job["job_id"] for job in squeue["jobs"]]
    for poll in range(1 + STEADY_POLLS):
        poll_dir = folder / f"poll{poll}"
        poll_dir.mkdir()
        (poll_dir / "nodes.json").write_text(documents["sinfo"])
        (poll_dir / "sacct.json").write_text(documents["sacct"])
        if poll == 0:
            fetched = ids
        else:
            fetched = rng.sample(ids, int(len(ids) * changed))
            wanted = set(fetched)
            for job in squeue["jobs"]:
                if job["job_id"] in wanted:
                    job["job_state"] = [rng.choice(STATES)]
        (poll_dir / "squeue.json").write_text(json.dumps(squeue))
        states = {**squeue, "jobs": [_state_entry(job) for job in squeue["jobs"]]}
        (poll_dir / "states.json").write_text(json.dumps(states))
        by_id = {job["job_id"]: job for job in squeue["jobs"]}
        for number, start in enumerate(range(0, len(fetched), IDS_PER_CALL)):
            chunk = [by_id[i] for i in fetched[start : start + IDS_PER_CALL]]
            text = json.dumps({**squeue, "jobs": chunk})
            (poll_dir / f"squeue-{number}.json").write_text(text)


def measure_child(folder: Path, way: str) -> dict[str, float]:
    from core.slurm_decode import decode_slurm_json
    from core.slurm_json import parse_sacct, parse_sinfo, parse_squeue
    from scheduler.poll_digest import (
        ChangedJobsRequest,
        DigestRequest,
        Generation,
        LabLimits,
        PollDigester,
    )
    from store.db import open_db
    from store.snapshots import save_slurm_changes, save_slurm_poll

    limits = LabLimits((("hoffman-lab", "hoffman-lab"),), {"hoffman-lab": 32}, {}, "overcap")
    digester = PollDigester()
    committed: Generation | None = None
    timings = []
    with tempfile.TemporaryDirectory() as tmp:
        db = open_db(Path(tmp) / "bench.db")
        for poll in range(1 + STEADY_POLLS):
            poll_dir = folder / f"poll{poll}"
            at = 1000.0 + 15 * poll
            start = time.perf_counter()
            if way == "before":
                live = parse_squeue(decode_slurm_json((poll_dir / "squeue.json").read_bytes()))
                nodes = parse_sinfo(decode_slurm_json((poll_dir / "nodes.json").read_bytes()))
                sacct = parse_sacct(decode_slurm_json((poll_dir / "sacct.json").read_bytes()))
                save_slurm_poll(db, live.records, sacct.records, nodes.records, at)
                del live, nodes, sacct
            else:
                states = poll_dir / "states.json" if way == "states" else None
                if states is not None:
                    # What the poller asks before fetching (the fetch itself is squeue's).
                    digester.changed_jobs(ChangedJobsRequest(states, committed))
                    squeue = tuple(sorted(poll_dir.glob("squeue-*.json")))
                else:
                    squeue = (poll_dir / "squeue.json",)
                digest = digester.digest(
                    DigestRequest(
                        squeue=squeue,
                        nodes=poll_dir / "nodes.json",
                        sacct=poll_dir / "sacct.json",
                        limits=limits,
                        base=committed,
                        states=states,
                    )
                )
                save_slurm_changes(db, digest.changes, at)
                committed = digest.generation
                del digest
            timings.append(time.perf_counter() - start)
        jobs = db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
        db.close()
    return {
        "jobs": jobs,
        "first_s": timings[0],
        "steady_s": sum(timings[1:]) / STEADY_POLLS,
        "peak_rss_mb": _peak_rss_kib() / 1024,
    }


def _child(folder: Path, way: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(folder), "--way", way],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _full_poll_2205(folder: Path, jobs: int, nodes: int) -> None:
    """22.05's full poll: its squeue/sinfo shapes, the same poll repeated."""
    documents = synthetic_documents("v0.0.38", jobs, nodes)
    for poll in range(1 + STEADY_POLLS):
        poll_dir = folder / f"poll{poll}"
        poll_dir.mkdir()
        (poll_dir / "squeue.json").write_text(documents["squeue"])
        (poll_dir / "nodes.json").write_text(documents["sinfo"])
        (poll_dir / "sacct.json").write_text(documents["sacct"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--changed", type=float, default=0.02)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--way", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure_child(Path(args.child), args.way)))
        return 0
    ways = {
        "full poll, before": "before",
        "full poll, digested": "full",
        "states-only poll": "states",
    }
    with tempfile.TemporaryDirectory(prefix="skybot-bench-") as tmp:
        big = Path(tmp) / "24x"
        big.mkdir()
        write_polls(big, args.jobs, args.nodes, args.changed)
        results = {name: _child(big, way) for name, way in ways.items()}
        small = Path(tmp) / "2205"
        small.mkdir()
        _full_poll_2205(small, 10_000, 1_000)
        old = {name: _child(small, way) for name, way in list(ways.items())[:2]}
    print(
        f"24.x shape: {args.jobs:,} jobs, {args.nodes:,} nodes, {args.changed:.0%} of jobs "
        f"changing state per poll; {STEADY_POLLS} steady polls after the first"
    )
    print(f"{'':26}{'first poll s':>14}{'steady poll s':>15}{'peak RSS MB':>13}{'jobs':>10}")
    for name, row in results.items():
        print(
            f"{name:26}{row['first_s']:>14.2f}{row['steady_s']:>15.2f}"
            f"{row['peak_rss_mb']:>13.0f}{row['jobs']:>10,.0f}"
        )
    print("22.05 shape: 10,000 jobs, 1,000 nodes, the same poll repeated")
    for name, row in old.items():
        print(
            f"{name:26}{row['first_s']:>14.2f}{row['steady_s']:>15.2f}"
            f"{row['peak_rss_mb']:>13.0f}{row['jobs']:>10,.0f}"
        )
    states = results["states-only poll"]
    full = old["full poll, digested"]
    print(
        f"24.x states-only steady poll {states['steady_s']:.2f} s (target <= 1.5 s), peak RSS "
        f"{states['peak_rss_mb']:.0f} MB (target <= 300 MB); 22.05 full poll "
        f"{max(full['first_s'], full['steady_s']):.2f} s (target <= 1 s), "
        f"{full['peak_rss_mb']:.0f} MB (target <= 150 MB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
