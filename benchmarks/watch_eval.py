"""What evaluating every active GPU watch costs per poll (issue 29: under 10 ms).

1,000 active watches (a mix of lab and overcap watches, 4 GPU types, 50 labs) over a snapshot
of 10,000 jobs and 1,000 nodes. Per poll the watcher works out the free index (once per
snapshot) and each lab's headroom from the view, then decides every watch
(core/gpu_watch.py). Two figures:

- warm view: as in skybot, where the reader warms each new view off the loop (lab usage, the
  idle list) before the watchers run; the watcher's own work is the index and the decisions;
- cold view: the same on a view nobody warmed, so the idle list and every lab's usage are
  counted inside the measurement too;
- warm view + store: the watcher's whole turn on the writer's thread as well: reading the
  1,000 active watches from SQLite (a file in a temporary directory) and deciding them.

Run: python3 benchmarks/watch_eval.py
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.support.factories import CLUSTER

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.cluster_config import LabConfig
from core.gpu_watch import Watch, headroom_by_lab, view_free_index, watch_outcomes
from core.records import Job, LabCap, Node
from core.snapshot import SOURCES, ClusterSnapshot, SourceStatus
from core.view import ClusterView
from store.db import open_db
from store.watches import NewWatch, active_watches, add_watch

JOBS, NODES, WATCHES, LABS = 10_000, 1_000, 1_000, 50
TYPES = ("a40", "a100", "rtx_6000", "2080_ti")
RUNS = 50


def snapshot(rng: random.Random) -> tuple[ClusterSnapshot, tuple[LabConfig, ...]]:
    labs = tuple(LabConfig(f"lab{i}", f"lab{i}", f"lab{i}") for i in range(LABS))
    partitions = (*(lab.partition for lab in labs[:10]), "overcap")
    nodes = []
    for i in range(NODES):
        gpu_type = TYPES[i % len(TYPES)]
        used = rng.choice((8, 8, 8, 6, 4, 0))
        nodes.append(
            Node(
                f"node{i:04d}", "MIXED", partitions, {gpu_type: 8}, {gpu_type: used} if used else {}
            )
        )
    jobs = []
    for i in range(JOBS):
        lab = labs[i % LABS]
        running = i % 3 != 0
        jobs.append(
            Job(
                job_id=1000 + i,
                name=f"job{i}",
                user=f"user{i % 500}",
                account=lab.account,
                partition=lab.partition,
                state="RUNNING" if running else "PENDING",
                reason="" if running else "AssocGrpGRES",
                gpus_by_type={TYPES[i % len(TYPES)]: 1},
            )
        )
    status = {s: SourceStatus(s, 1000.0) for s in SOURCES}
    caps = tuple(LabCap(lab.account, 120) for lab in labs)
    return ClusterSnapshot(jobs=tuple(jobs), nodes=tuple(nodes), caps=caps, status=status), labs


def watches(rng: random.Random, labs: tuple[LabConfig, ...]) -> list[Watch]:
    out = []
    for i in range(WATCHES):
        lab = labs[i % LABS]
        overcap = i % 4 == 0
        out.append(
            Watch(
                i + 1,
                "T1",
                f"U{i}",
                f"user{i % 500}",
                rng.choice(TYPES),
                rng.choice((7, 8)),
                overcap,
                lab.name,
                "overcap" if overcap else lab.partition,
                "overcap" if overcap else lab.account,
                0.0,
                1e12,
            )
        )
    return out


def one_poll(view: ClusterView, active: list[Watch]) -> float:
    started = time.perf_counter()
    watch_outcomes(active, view_free_index(view), headroom_by_lab(view), 2000.0)
    return (time.perf_counter() - started) * 1000


def with_store(view: ClusterView, db_path: Path) -> float:
    db = open_db(db_path)
    try:
        started = time.perf_counter()
        with db.atomic():
            watch_outcomes(
                active_watches(db, CLUSTER), view_free_index(view), headroom_by_lab(view), 2000.0
            )
        return (time.perf_counter() - started) * 1000
    finally:
        db.close()


def stored(active: list[Watch], db_path: Path) -> None:
    db = open_db(db_path)
    for w in active:
        new = NewWatch(w.team_id, w.user_id, w.cluster_user, w.gpu_type, w.count, w.overcap,
                       w.lab, w.partition, w.account)  # fmt: skip
        add_watch(db, CLUSTER, new, 0.0, 1e12, 10)
    db.close()


def main() -> None:
    rng = random.Random(29)
    snap, labs = snapshot(rng)
    active = watches(rng, labs)
    warm, cold, store = [], [], []
    with tempfile.TemporaryDirectory() as scratch:
        db_path = Path(scratch) / "watches.db"
        stored(active, db_path)
        for _ in range(RUNS):
            warm.append(one_poll(ClusterView(snap, labs).warm(), active))
            cold.append(one_poll(ClusterView(snap, labs), active))
            store.append(with_store(ClusterView(snap, labs).warm(), db_path))
    fired = len(
        watch_outcomes(active, view_free_index(ClusterView(snap, labs)), {}, 0.0)
    )  # overcap watches only: a sanity figure, not part of the timing
    print(
        f"{WATCHES:,} watches, {JOBS:,} jobs, {NODES:,} nodes, {RUNS} polls "
        f"({fired} overcap watches true)"
    )
    rows = (
        ("warm view (as skybot runs it)", warm),
        ("cold view", cold),
        ("warm view + store read", store),
    )
    for name, times in rows:
        print(
            f"  {name:31s} median {statistics.median(times):6.2f} ms  "
            f"max {max(times):6.2f} ms per poll"
        )


if __name__ == "__main__":
    main()
