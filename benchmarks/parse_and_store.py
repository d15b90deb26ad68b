"""Benchmark: one Slurm poll of a large cluster, parsed and stored, per JSON generation.

Builds synthetic `squeue`/`sinfo`/`sacct` documents of 10,000 jobs and 1,000 nodes by
cloning the real records in tests/fixtures/slurm/<version>/ (so every field keeps its real
shape) and writes them to files, as the poller's commands write their output. Then, in a
fresh child process per version (so peak RSS is that poll's alone): read each file, decode
(msgspec, only the fields skybot reads), parse into records, store the snapshot with its
transitions.
Two polls are stored: the first inserts every job, the second (half the jobs changed) is
the steady state. Targets (issue 3): <= 1 s and <= 150 MB.

    python3 benchmarks/parse_and_store.py [--jobs 10000] [--nodes 1000]
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "slurm"
VERSIONS = tuple(v for v in ("v0.0.38", "v0.0.42") if (FIXTURES / v).is_dir())
USERS = ("alice", "bob", "carol", "dave")


def _set_number(record: dict[str, Any], key: str, value: int) -> None:
    """Set a number in whichever shape this Slurm generation uses for it."""
    current = record.get(key)
    if isinstance(current, dict) and "number" in current:
        record[key] = {"set": True, "infinite": False, "number": value}
    else:
        record[key] = value


def synthetic_documents(version: str, jobs: int, nodes: int) -> dict[str, str]:
    folder = FIXTURES / version
    squeue = json.loads((folder / "squeue.json").read_text())
    sinfo = json.loads((folder / "sinfo.json").read_text())
    if "sinfo" in sinfo and (folder / "nodes.json").is_file():
        # 23.02+ sinfo groups nodes; the poller reads them per node from scontrol instead.
        sinfo = json.loads((folder / "nodes.json").read_text())
    sacct = json.loads((folder / "sacct.json").read_text())

    def clone_jobs(templates: list[dict[str, Any]], count: int, first_id: int) -> list[Any]:
        out = []
        for i in range(count):
            record = copy.deepcopy(templates[i % len(templates)])
            job_id = first_id + i
            if "job_id" in record:
                _set_number(record, "job_id", job_id)
            if "user_name" in record:
                record["user_name"] = USERS[i % len(USERS)]
            if "user" in record and isinstance(record["user"], str):
                record["user"] = USERS[i % len(USERS)]
            out.append(record)
        return out

    squeue["jobs"] = clone_jobs(squeue["jobs"], jobs, 100_000)
    sacct["jobs"] = clone_jobs(sacct["jobs"], max(1, jobs // 20), 200_000)
    node_key = "nodes" if "nodes" in sinfo else "sinfo"
    node_templates = sinfo[node_key]
    cloned_nodes = []
    for i in range(nodes):
        record = copy.deepcopy(node_templates[i % len(node_templates)])
        if node_key == "nodes":
            record["name"] = record["hostname"] = f"node{i:04d}"
        else:
            record["nodes"]["nodes"] = [f"node{i:04d}"]
        cloned_nodes.append(record)
    sinfo[node_key] = cloned_nodes
    return {
        "squeue": json.dumps(squeue),
        "sinfo": json.dumps(sinfo),
        "sacct": json.dumps(sacct),
    }


def _peak_rss_kib() -> int:
    """This process's peak RSS. (getrusage's ru_maxrss would count the parent's memory at
    fork time, since Linux keeps it across exec; VmHWM belongs to the new image.)"""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def measure_child(folder: Path) -> dict[str, float]:
    """Runs in the child process: what one poll does with each command's output file."""
    sys.path.insert(0, str(REPO))
    from dataclasses import replace

    from core.slurm_decode import decode_slurm_json
    from core.slurm_json import parse_sacct, parse_sinfo, parse_squeue
    from store.db import open_db
    from tests.support.slurm_polls import save_slurm_poll

    baseline_kib = _peak_rss_kib()
    timings = []
    counts = (0, 0)
    with tempfile.TemporaryDirectory() as tmp:
        db = open_db(Path(tmp) / "bench.db")
        for poll in range(2):
            start = time.perf_counter()
            # As the poller does: the command's stdout file read once, decoded, parsed.
            live = parse_squeue(decode_slurm_json((folder / "squeue.json").read_bytes())).records
            nodes = parse_sinfo(decode_slurm_json((folder / "sinfo.json").read_bytes())).records
            accounted = parse_sacct(decode_slurm_json((folder / "sacct.json").read_bytes()))
            parse_done = time.perf_counter()
            if poll == 1:
                # Steady state: half the jobs changed state since the last poll.
                live = [replace(j, state="COMPLETING") if i % 2 else j for i, j in enumerate(live)]
            store_start = time.perf_counter()
            save_slurm_poll(db, live, accounted.records, nodes, at=1000.0 + poll * 15)
            end = time.perf_counter()
            timings.append((parse_done - start, end - store_start))
            counts = (len(live), len(nodes))
            del live, nodes, accounted
        db.close()
    peak_kib = _peak_rss_kib()
    return {
        "jobs": counts[0],
        "nodes": counts[1],
        "squeue_mb": (folder / "squeue.json").stat().st_size / 1e6,
        "first_parse_s": timings[0][0],
        "first_store_s": timings[0][1],
        "steady_parse_s": timings[1][0],
        "steady_store_s": timings[1][1],
        "peak_rss_mb": peak_kib / 1024,
        "baseline_rss_mb": baseline_kib / 1024,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure_child(Path(args.child))))
        return 0

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for version in VERSIONS:
            folder = Path(tmp) / version
            folder.mkdir()
            for name, text in synthetic_documents(version, args.jobs, args.nodes).items():
                (folder / f"{name}.json").write_text(text)
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(folder)],
                capture_output=True,
                text=True,
                check=True,
            )
            results[version] = json.loads(out.stdout.strip().splitlines()[-1])

    print(f"Slurm poll of {args.jobs:,} jobs and {args.nodes:,} nodes: decode+parse, then store")
    print(f"{'':28}" + "".join(f"{v:>14}" for v in VERSIONS))
    rows = [
        ("squeue --json size (MB)", "squeue_mb", "{:>14.1f}"),
        ("jobs parsed", "jobs", "{:>14,.0f}"),
        ("nodes parsed", "nodes", "{:>14,.0f}"),
        ("first poll: parse (s)", "first_parse_s", "{:>14.3f}"),
        ("first poll: store (s)", "first_store_s", "{:>14.3f}"),
        ("steady poll: parse (s)", "steady_parse_s", "{:>14.3f}"),
        ("steady poll: store (s)", "steady_store_s", "{:>14.3f}"),
        ("peak RSS (MB)", "peak_rss_mb", "{:>14.1f}"),
        ("  interpreter + imports (MB)", "baseline_rss_mb", "{:>14.1f}"),
    ]
    for label, key, fmt in rows:
        print(f"{label:28}" + "".join(fmt.format(results[v][key]) for v in VERSIONS))
    worst_time = max(
        max(r["first_parse_s"] + r["first_store_s"], r["steady_parse_s"] + r["steady_store_s"])
        for r in results.values()
    )
    worst_rss = max(r["peak_rss_mb"] for r in results.values())
    print(
        f"worst poll {worst_time:.3f} s (target <= 1 s); worst peak RSS {worst_rss:.1f} MB "
        f"(target <= 150 MB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
