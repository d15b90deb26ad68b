"""Reading back the job transitions the Slurm poller records (store/slurm_writes.py).

Rows are read in id order, past the job notifier's cursor (store/alerts.py), so each
transition is looked at once however the notifier is interrupted.
"""

from __future__ import annotations

from collections.abc import Collection

import sqlite_utils

from core.record_codec import decode_job
from core.records import Job
from core.transitions import REQUEUED, Transition
from store.alerts import load_cursor


def pending_transition_users(
    db: sqlite_utils.Database, cluster: str, batch: int
) -> tuple[set[str], int | None]:
    """Cluster users of the cluster's next `batch` transitions past its cursor, and the
    batch's last id (None when there are none)."""
    rows = db.execute(
        "SELECT id, user FROM job_transitions WHERE cluster = ? AND id > ? ORDER BY id LIMIT ?",
        [cluster, load_cursor(db, cluster), batch],
    ).fetchall()
    if not rows:
        return set(), None
    return {r[1] for r in rows}, rows[-1][0]


def load_transitions(
    db: sqlite_utils.Database,
    cluster: str,
    after: int,
    through: int,
    to_states: Collection[str],
) -> list[tuple[int, Transition, float]]:
    """(id, transition, when) of the cluster's transitions into one of `to_states` with an id
    in (after, through], by id."""
    states = sorted(to_states)
    marks = ", ".join("?" for _ in states)
    rows = db.execute(
        "SELECT id, from_state, to_state, restarts, at, record FROM job_transitions "
        f"WHERE cluster = ? AND id > ? AND id <= ? AND to_state IN ({marks}) ORDER BY id",
        [cluster, after, through, *states],
    ).fetchall()
    return [(r[0], Transition(decode_job(r[5]), r[1], r[2], r[3]), r[4]) for r in rows]


def earlier_job_records(
    db: sqlite_utils.Database,
    cluster: str,
    job_id: int,
    before_id: int,
    restarts_below: int,
    limit: int = 10,
) -> list[Job]:
    """The job's records as recorded by its transitions before row `before_id` with fewer
    than `restarts_below` restarts (its earlier runs), newest first, at most `limit`."""
    rows = db.execute(
        "SELECT record FROM job_transitions WHERE cluster = ? AND job_id = ? AND id < ? "
        "AND restarts < ? ORDER BY id DESC LIMIT ?",
        [cluster, job_id, before_id, restarts_below, limit],
    ).fetchall()
    return [decode_job(record) for (record,) in rows]


def last_job_record(db: sqlite_utils.Database, cluster: str, job_id: int) -> Job | None:
    """The job as its latest transition recorded it (kept `history.keep_days`, ended jobs
    included), or None if skybot has no record of it."""
    row = db.execute(
        "SELECT record FROM job_transitions WHERE cluster = ? AND job_id = ? "
        "ORDER BY id DESC LIMIT 1",
        [cluster, job_id],
    ).fetchone()
    return decode_job(row[0]) if row else None


def last_array_task_record(
    db: sqlite_utils.Database, cluster: str, array_job_id: int, task: str
) -> Job | None:
    """Array task `array_job_id`_`task` as its latest transition recorded it. A task's own job
    id is only known once it ran; Slurm gives it an id no lower than the array's."""
    row = db.execute(
        "SELECT record FROM job_transitions WHERE cluster = ? AND job_id >= ? "
        "AND json_extract(record, '$.array_job_id') = ? "
        "AND json_extract(record, '$.array_task') = ? ORDER BY id DESC LIMIT 1",
        [cluster, array_job_id, array_job_id, task],
    ).fetchone()
    return decode_job(row[0]) if row else None


def last_requeue(db: sqlite_utils.Database, cluster: str, job_id: int) -> tuple[Job, float] | None:
    """The job as its latest requeue was recorded, and when skybot saw it: the record names
    the stopped run's state and Slurm's times for it when sacct listed that run."""
    row = db.execute(
        "SELECT record, at FROM job_transitions WHERE cluster = ? AND job_id = ? "
        "AND to_state = ? ORDER BY id DESC LIMIT 1",
        [cluster, job_id, REQUEUED],
    ).fetchone()
    return (decode_job(row[0]), float(row[1])) if row else None


def transitions_after(db: sqlite_utils.Database, cluster: str, after: int) -> bool:
    """Whether the cluster has a transition with an id past `after`."""
    row = db.execute(
        "SELECT 1 FROM job_transitions WHERE cluster = ? AND id > ? LIMIT 1", [cluster, after]
    ).fetchone()
    return row is not None
