"""Writing what a Slurm poll changed: the job and node rows, the job states and transitions.

Which transitions a poll makes is core's to settle (core/transitions.py `settle_transitions`);
this module answers what the store knows of the jobs (`StoredJobs`) and writes the outcome,
all in the one transaction, so a kill -9 leaves either the whole poll or none of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from core.gc_pauses import no_collections
from core.record_codec import decode_job, encode_record
from core.records import Job
from core.snapshot_rows import SlurmChanges
from core.transitions import KnownState, Settled, Transition, settle_transitions, with_gaps_filled
from store.clusters import cluster_counter
from store.row_log import log_gone, next_rows_version
from store.snapshots import mark_success
from store.unreadable import name_once, readable


def save_slurm_changes(
    db: sqlite_utils.Database,
    cluster: str,
    changes: SlurmChanges,
    at: float,
    accounting_answered: bool = True,
) -> list[Transition]:
    """Apply one poll of `cluster` to its snapshot and record its transitions, in one
    transaction; the same tables as a full replacement would leave."""
    # A first poll's save of 100,000 jobs set off collections of 57-122 ms on the writer's
    # thread, holding the loop's acks (benchmarks/poll_ack_latency.py --probe).
    with no_collections(), db.atomic():
        settled = settle_transitions(changes.observed, StoredJobs(db, cluster, changes, at), at)
        for job_id in settled.unreadable:
            name_once(f"job {job_id}: its stored state cannot be read; left out of this poll")
        for job_id in settled.incomparable:
            name_once(f"job {job_id}: its states cannot be compared; left out of this poll")
        _write_poll(db, cluster, changes, settled, at)
        mark_success(db, cluster, "slurm", at)
        if accounting_answered:
            mark_success(db, cluster, "accounting", at)
    return settled.transitions


@dataclass(frozen=True, slots=True)
class StoredJobs:
    """What the store knew of the jobs before this poll's changes (core's `KnownJobs`)."""

    db: sqlite_utils.Database
    cluster: str
    changes: SlurmChanges
    at: float

    def states(self, job_ids: Sequence[int]) -> tuple[dict[int, KnownState], set[int]]:
        # A full poll reads every state in one scan rather than by id.
        ids = None if self.changes.full else list(job_ids)
        return _known_states(self.db.conn, self.cluster, ids)

    def listed_now(self, job_ids: Sequence[int]) -> set[int]:
        return _listed_now(self.db.conn, self.cluster, self.changes, job_ids)

    def last_seen(self, job_ids: Sequence[int]) -> dict[int, Job]:
        return last_seen_jobs(self.db, self.cluster, job_ids)

    def last_allocated_gpus(self, job_ids: Sequence[int]) -> dict[int, dict[str, int]]:
        return last_allocated_gpus(self.db, self.cluster, job_ids)

    def history_start(self) -> float:
        return history_start(self.db, self.cluster, self.at)


def _write_poll(
    db: sqlite_utils.Database, cluster: str, changes: SlurmChanges, settled: Settled, at: float
) -> None:
    """The rows, lab usages, job states and transitions of one settled poll."""
    conn = db.conn
    # Plain executemany: at 10,000 jobs per poll, sqlite-utils' per-batch column
    # detection costs more than the inserts themselves.
    _write_rows(conn, cluster, changes)
    conn.execute("DELETE FROM lab_usage WHERE cluster = ?", (cluster,))
    conn.executemany(
        "INSERT INTO lab_usage (cluster, lab, account, overcap_account, record) "
        "VALUES (?, ?, ?, ?, ?)",
        ((cluster, *usage) for usage in changes.lab_usages or ()),
    )
    conn.executemany(
        "INSERT INTO job_states (cluster, job_id, state, restarts, seen_at) "
        "VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT(cluster, job_id) DO UPDATE SET state = excluded.state, "
        "restarts = excluded.restarts, seen_at = excluded.seen_at",
        ((cluster, j.job_id, j.state, j.restarts, at) for j in settled.states.values()),
    )
    conn.executemany(
        "INSERT INTO job_transitions (cluster, job_id, user, from_state, to_state, restarts, "
        "at, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            (
                cluster,
                t.job.job_id,
                t.job.user,
                t.from_state,
                t.to_state,
                t.restarts,
                at,
                encode_record(t.job),
            )
            for t in settled.transitions
        ),
    )


def _write_rows(conn: Any, cluster: str, changes: SlurmChanges) -> None:
    """The job and node rows, each tagged with this save's rows version (store/row_log.py)."""
    if not (
        changes.full
        or changes.job_rows
        or changes.gone_job_ids
        or changes.node_rows
        or changes.gone_nodes
    ):
        return
    version = next_rows_version(conn, cluster, changes.full)
    if changes.full:
        conn.execute("DELETE FROM jobs WHERE cluster = ?", (cluster,))
        conn.execute("DELETE FROM nodes WHERE cluster = ?", (cluster,))
    else:
        conn.executemany(
            "DELETE FROM jobs WHERE cluster = ? AND job_id = ?",
            ((cluster, i) for i in changes.gone_job_ids),
        )
        conn.executemany(
            "DELETE FROM nodes WHERE cluster = ? AND name = ?",
            ((cluster, n) for n in changes.gone_nodes),
        )
        log_gone(conn, cluster, "jobs", changes.gone_job_ids, version)
        log_gone(conn, cluster, "nodes", changes.gone_nodes, version)
    conn.executemany(
        "INSERT OR REPLACE INTO jobs (cluster, job_id, user, account, partition, state, record, "
        "written_in) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ((cluster, *row, version) for row in changes.job_rows),
    )
    conn.executemany(
        "INSERT OR REPLACE INTO nodes (cluster, name, record, written_in) VALUES (?, ?, ?, ?)",
        ((cluster, *row, version) for row in changes.node_rows),
    )


def _known_states(
    conn: Any, cluster: str, job_ids: list[int] | None
) -> tuple[dict[int, KnownState], set[int]]:
    """What the store knew of these jobs of the cluster (all its jobs with None), and which
    jobs' stored state is not a state (SQLite keeps whatever type a row was given)."""
    if job_ids is None:
        rows: Iterable[Any] = conn.execute(
            "SELECT job_id, state, restarts FROM job_states WHERE cluster = ?", (cluster,)
        )
    else:
        rows = (
            row
            for chunk in _chunks(job_ids, 500)
            for row in conn.execute(
                "SELECT job_id, state, restarts FROM job_states WHERE cluster = ? AND job_id IN "
                f"({', '.join('?' for _ in chunk)})",
                [cluster, *chunk],
            )
        )
    known: dict[int, KnownState] = {}
    unreadable: set[int] = set()
    for job_id, state, restarts in rows:
        if type(state) is str and type(restarts) is int:
            known[job_id] = KnownState(state, restarts)
        else:
            unreadable.add(job_id)
    return known, unreadable


# States in which a job holds the GPUs its record lists (allocated, not requested).
_HOLDING_STATES = ("RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED")


def _listed_now(conn: Any, cluster: str, changes: SlurmChanges, job_ids: Sequence[int]) -> set[int]:
    """Which of `job_ids` squeue lists after this poll: in its changed rows, or (for a poll of
    changes only) still in the table and not gone."""
    wanted = set(job_ids)
    listed = {row[0] for row in changes.job_rows if row[0] in wanted}
    if changes.full or not wanted:
        return listed
    gone = set(changes.gone_job_ids)
    for chunk in _chunks(sorted(wanted - listed), 500):
        marks = ", ".join("?" for _ in chunk)
        rows = conn.execute(
            f"SELECT job_id FROM jobs WHERE cluster = ? AND job_id IN ({marks})", [cluster, *chunk]
        )
        listed.update(job_id for (job_id,) in rows if job_id not in gone)
    return listed


def last_allocated_gpus(
    db: sqlite_utils.Database, cluster: str, job_ids: Sequence[int]
) -> dict[int, dict[str, int]]:
    """The GPUs each job was last seen holding: in the previous snapshot, or else in the
    latest recorded transition that found it running."""
    found: dict[int, dict[str, int]] = {}
    for chunk in _chunks(list(job_ids), 500):
        marks = ", ".join("?" for _ in chunk)
        holding = ", ".join("?" for _ in _HOLDING_STATES)
        rows = db.execute(
            f"SELECT job_id, record, 0 AS source, 0 AS id FROM jobs WHERE cluster = ? "
            f"AND job_id IN ({marks}) AND state IN ({holding}) UNION ALL "
            f"SELECT job_id, record, 1, id FROM job_transitions WHERE cluster = ? "
            f"AND job_id IN ({marks}) AND to_state IN ({holding}) ORDER BY source, id DESC",
            [cluster, *chunk, *_HOLDING_STATES, cluster, *chunk, *_HOLDING_STATES],
        ).fetchall()
        for job_id, record, _, _ in rows:
            if job_id not in found:
                job = readable(f"job {job_id}", decode_job, record)
                if job is not None and job.gpus_by_type:
                    found[job_id] = job.gpus_by_type
    return found


def last_seen_jobs(
    db: sqlite_utils.Database, cluster: str, job_ids: Sequence[int]
) -> dict[int, Job]:
    """Each job as skybot last saw it: its record in the previous snapshot (squeue's), or
    else its latest recorded transition, with what that leaves empty (an output path sacct
    did not give) filled from its earlier records."""
    found: dict[int, Job] = {}
    for chunk in _chunks(list(job_ids), 500):
        marks = ", ".join("?" for _ in chunk)
        rows = db.execute(
            f"SELECT job_id, record, 0 AS source, 0 AS id FROM jobs WHERE cluster = ? "
            f"AND job_id IN ({marks}) UNION ALL SELECT job_id, record, 1, id FROM job_transitions "
            f"WHERE cluster = ? AND job_id IN ({marks}) ORDER BY source, id DESC",
            [cluster, *chunk, cluster, *chunk],
        ).fetchall()
        for job_id, record, _, _ in rows:
            earlier = readable(f"job {job_id}", decode_job, record)
            if earlier is None:
                continue
            later = found.get(job_id)
            found[job_id] = earlier if later is None else with_gaps_filled(later, earlier)
    return found


def _chunks(items: list[int], size: int) -> Iterable[list[int]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def history_start(db: sqlite_utils.Database, cluster: str, now: float) -> float:
    """When this store first watched the cluster (set on first call). Nothing that ended
    before then is reported: a fresh install, or a cluster added to the configuration, must
    not DM people about last week's jobs.

    Whole seconds, rounded down as Slurm's times are: a job that ends in the same second as
    the first poll (it may have started just after the poll did) is news."""
    name = cluster_counter("history_start", cluster)
    with db.atomic():
        db.execute("INSERT OR IGNORE INTO counters (name, value) VALUES (?, ?)", [name, int(now)])
        return float(db.execute("SELECT value FROM counters WHERE name = ?", [name]).fetchone()[0])
