"""What the store knows of job arrays: whether one still has tasks in the queue, how each of
its tasks ended, and who asked to hear of each task (`/sky notify tasks on`).

An array's end DM (scheduler/watchers/array_dms.py) waits in `array_ends_waiting` from its
first task's end until no task of it is pending or running, looked at after every poll: the
snapshot (`jobs`) may list the array's pending record a poll longer than its tasks' ends take
to be recorded, so the last end's transition is not the moment to decide.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

import sqlite_utils

from core.record_codec import decode_job
from core.records import ACTIVE_STATES, FINAL_STATES, Job

_ACTIVE = sorted(ACTIVE_STATES)
_FINAL = sorted(FINAL_STATES)


def array_in_queue(db: sqlite_utils.Database, cluster: str, array_job_id: int) -> bool:
    """Whether any task of the array is still pending or running: in the cluster's snapshot,
    or as skybot last knew it (a task that left squeue while sacct did not answer keeps its
    last state until sacct tells its end). A task's job id is never below its array's."""
    marks = ", ".join("?" for _ in _ACTIVE)
    listed = db.execute(
        "SELECT 1 FROM jobs WHERE cluster = ? AND job_id >= ? "
        f"AND state IN ({marks}) AND json_extract(record, '$.array_job_id') = ? LIMIT 1",
        [cluster, array_job_id, *_ACTIVE, array_job_id],
    ).fetchone()
    if listed is not None:
        return True
    unended = db.execute(
        f"SELECT 1 FROM job_states WHERE cluster = ? AND state IN ({marks}) AND job_id IN ("
        "SELECT job_id FROM job_transitions WHERE cluster = ? AND job_id >= ? "
        "AND json_extract(record, '$.array_job_id') = ?) LIMIT 1",
        [cluster, *_ACTIVE, cluster, array_job_id, array_job_id],
    ).fetchone()
    return unended is not None


def array_task_ends(db: sqlite_utils.Database, cluster: str, array_job_id: int) -> list[Job]:
    """The latest final record of each of the array's tasks (a requeued task's last end), in
    the order skybot saw them end."""
    marks = ", ".join("?" for _ in _FINAL)
    rows = db.execute(
        "SELECT record FROM job_transitions WHERE cluster = ? AND job_id >= ? "
        f"AND to_state IN ({marks}) AND json_extract(record, '$.array_job_id') = ? ORDER BY id",
        [cluster, array_job_id, *_FINAL, array_job_id],
    ).fetchall()
    latest: dict[tuple[int, str | None], Job] = {}
    for (record,) in rows:
        job = decode_job(record)
        key = (job.job_id, job.array_task)
        latest.pop(key, None)
        latest[key] = job
    return list(latest.values())


def wait_for_array_ends(
    db: sqlite_utils.Database,
    cluster: str,
    waiting: Mapping[int, Collection[tuple[str, str]]],
    now: float,
    end_key: Callable[[int, str, str], str],
) -> None:
    """Remember that these Slack accounts (team, user) are to hear of these arrays' ends,
    unless the end DM is in the outbox already (`end_key` names it: the array was told
    ended, and a task ending after that, or a backlog's later batch, is not a new end)."""
    rows = [
        (cluster, array_job_id, team_id, user_id, now)
        for array_job_id, keys in waiting.items()
        for team_id, user_id in keys
        if db.execute(
            "SELECT 1 FROM outbox WHERE key = ?", [end_key(array_job_id, team_id, user_id)]
        ).fetchone()
        is None
    ]
    db.conn.executemany(
        "INSERT OR IGNORE INTO array_ends_waiting (cluster, array_job_id, team_id, user_id, "
        "since) VALUES (?, ?, ?, ?, ?)",
        rows,
    )


def arrays_waiting(db: sqlite_utils.Database, cluster: str) -> dict[int, set[tuple[str, str]]]:
    """The cluster's arrays whose end DM is still to be told, and to whom."""
    waiting: dict[int, set[tuple[str, str]]] = {}
    for array_job_id, team_id, user_id in db.execute(
        "SELECT array_job_id, team_id, user_id FROM array_ends_waiting WHERE cluster = ?",
        [cluster],
    ):
        waiting.setdefault(array_job_id, set()).add((team_id, user_id))
    return waiting


def array_end_told(db: sqlite_utils.Database, cluster: str, array_job_id: int) -> None:
    db.execute(
        "DELETE FROM array_ends_waiting WHERE cluster = ? AND array_job_id = ?",
        [cluster, array_job_id],
    )


def load_task_optins(db: sqlite_utils.Database) -> set[tuple[str, str]]:
    """(team, Slack user) of everyone who asked for a DM per array task."""
    return {(r[0], r[1]) for r in db.execute("SELECT team_id, user_id FROM notify_task_optins")}


def tasks_wanted(db: sqlite_utils.Database, team_id: str, user_id: str) -> bool:
    return (team_id, user_id) in load_task_optins(db)


def save_tasks_wanted(
    db: sqlite_utils.Database, team_id: str, user_id: str, wanted: bool, now: float
) -> None:
    with db.atomic():
        if wanted:
            db.execute(
                "INSERT OR REPLACE INTO notify_task_optins (team_id, user_id, updated_at) "
                "VALUES (?, ?, ?)",
                [team_id, user_id, now],
            )
        else:
            db.execute(
                "DELETE FROM notify_task_optins WHERE team_id = ? AND user_id = ?",
                [team_id, user_id],
            )
