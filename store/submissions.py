"""The submission queue: accepted before the ack, performed at most once, reported always.

States: queued → submitting → submitted | failed. A submission found in `submitting` after a
restart was interrupted mid-sbatch; the worker looks for its tag in Slurm before trying again.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from core.config_schema import SubmitConfig
from core.runner_contract import COMMENT_PREFIX
from store.outbox import OutboxMessage
from store.outbox import enqueue as enqueue_messages

QUEUED, SUBMITTING, SUBMITTED, FAILED = "queued", "submitting", "submitted", "failed"


class QueueRefused(Exception):
    """Too many queued submissions, or too many in the last minute: the message says which."""


@dataclass(frozen=True, slots=True)
class Submission:
    id: int
    team_id: str
    user_id: str
    cluster_user: str
    script: str
    options: dict[str, str]
    tag: str
    state: str
    response_url: str | None
    created_at: float
    attempts: int
    # The cluster it is submitted to, and whose job id `job_id` is.
    cluster: str
    job_id: int | None = None
    error: str | None = None
    reported_at: float | None = None
    # The job form's script (sbatch reads it on stdin); `script` is then its working directory.
    script_text: str | None = None


@dataclass(frozen=True, slots=True)
class SubmissionRequest:
    """What a user asked to submit, and where the answer goes.
    `notify_start`: DM the submitter when the job starts (`--notify-start`)."""

    team_id: str
    user_id: str
    cluster_user: str
    script: str
    options: dict[str, str]
    response_url: str | None = None
    notify_start: bool = False
    # The job form's script; `script` is then the directory it is submitted from.
    script_text: str | None = None
    # Its tag when the asker names it (the job form: its modal's), so asking again returns
    # the submission already queued instead of a second one; None: a new random tag.
    tag: str | None = None


def enqueue(
    db: sqlite_utils.Database,
    cluster: str,
    request: SubmissionRequest,
    limits: SubmitConfig,
    now: float,
) -> Submission:
    """Record a submission to `cluster`, unless the user is over their queue cap or rate
    limit (counted over every cluster: they bound one person's use of the runner)."""
    with db.atomic():
        if request.tag is not None:
            already = _select(db, "tag = ?", [request.tag])
            if already:
                return already[0]
        _refuse_over_limits(db, request.cluster_user, limits, now)
        tag = request.tag or secrets.token_hex(8)
        cursor = db.execute(
            "INSERT INTO submissions (cluster, team_id, user_id, cluster_user, script, options, "
            "tag, state, response_url, created_at, attempts, notify_start, script_text) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
            [
                cluster,
                request.team_id,
                request.user_id,
                request.cluster_user,
                request.script,
                json.dumps(request.options),
                tag,
                QUEUED,
                request.response_url,
                now,
                int(request.notify_start),
                request.script_text,
            ],
        )
        submission_id = cursor.lastrowid
        assert submission_id is not None
        _audit(
            db,
            now,
            request,
            {"id": submission_id, "script": request.script, "options": request.options},
            QUEUED,
        )
    found = get(db, submission_id)
    assert found is not None
    return found


def _refuse_over_limits(
    db: sqlite_utils.Database, cluster_user: str, limits: SubmitConfig, now: float
) -> None:
    """QueueRefused if the user has too many submissions waiting or made in the last minute."""
    max_queued = limits.max_queued_per_user
    waiting = db.execute(
        "SELECT COUNT(*) FROM submissions WHERE cluster_user = ? AND state IN (?, ?)",
        [cluster_user, QUEUED, SUBMITTING],
    ).fetchone()[0]
    if waiting >= max_queued:
        raise QueueRefused(
            f"You already have {waiting} submissions waiting (the limit is {max_queued}); "
            "try again when they are through."
        )
    # A submission that failed (the runner refused the script or options, or sbatch
    # did) put nothing in the queue: it does not count, so a mistyped path does not
    # cost the corrected one its turn. The per-user token bucket (handlers/router.py)
    # still bounds how often anyone starts the runner.
    recent = db.execute(
        "SELECT COUNT(*) FROM submissions WHERE cluster_user = ? AND created_at > ? AND state != ?",
        [cluster_user, now - 60, FAILED],
    ).fetchone()[0]
    if recent >= limits.max_per_minute:
        raise QueueRefused(
            f"That is {recent} submissions in the last minute (the limit is "
            f"{limits.max_per_minute}); wait a minute and try again."
        )


def claim_next(db: sqlite_utils.Database, cluster: str, now: float) -> Submission | None:
    """Move the cluster's oldest queued submission to `submitting` (before sbatch runs) and
    return it."""
    with db.atomic():
        row = db.execute(
            "SELECT id FROM submissions WHERE cluster = ? AND state = ? ORDER BY id LIMIT 1",
            [cluster, QUEUED],
        ).fetchone()
        if row is None:
            return None
        db.execute(
            "UPDATE submissions SET state = ?, started_at = ?, attempts = attempts + 1 "
            "WHERE id = ?",
            [SUBMITTING, now, row[0]],
        )
    return get(db, row[0])


def interrupted(db: sqlite_utils.Database, cluster: str) -> list[Submission]:
    """The cluster's submissions a crash left between 'about to run sbatch' and 'recorded its
    answer'."""
    return _select(db, "cluster = ? AND state = ?", [cluster, SUBMITTING])


def requeue(db: sqlite_utils.Database, submission_id: int) -> None:
    db.execute(
        "UPDATE submissions SET state = ? WHERE id = ? AND state = ?",
        [QUEUED, submission_id, SUBMITTING],
    )


def finish(
    db: sqlite_utils.Database,
    submission: Submission,
    now: float,
    *,
    job_id: int | None = None,
    error: str | None = None,
    report: OutboxMessage | None = None,
) -> Submission:
    """Record the outcome and, in the same transaction, queue the message telling the user."""
    state = SUBMITTED if job_id is not None else FAILED
    with db.atomic():
        if report is not None:
            enqueue_messages(db, [report], now)
            db.execute("UPDATE submissions SET reported_at = ? WHERE id = ?", [now, submission.id])
        db.execute(
            "UPDATE submissions SET state = ?, job_id = ?, error = ?, finished_at = ? WHERE id = ?",
            [state, job_id, error, now, submission.id],
        )
        _audit(db, now, submission, {"id": submission.id, "job_id": job_id, "error": error}, state)
    found = get(db, submission.id)
    assert found is not None
    return found


def find_job_by_comment(db: sqlite_utils.Database, cluster: str, comment: str) -> int | None:
    """The job id whose Slurm comment is `comment`, among the cluster's jobs the pollers have
    seen."""
    needle = f'%"comment":{json.dumps(comment)}%'
    for table in ("jobs", "job_transitions"):
        row = db.execute(
            f"SELECT job_id FROM {table} WHERE cluster = ? AND record LIKE ? LIMIT 1",
            [cluster, needle],
        ).fetchone()
        if row:
            return int(row[0])
    return None


def get(db: sqlite_utils.Database, submission_id: int) -> Submission | None:
    found = _select(db, "id = ?", [submission_id])
    return found[0] if found else None


def submission_counts(db: sqlite_utils.Database) -> dict[str, int]:
    """How many submissions are in each state; a state with none is absent."""
    return dict(db.execute("SELECT state, COUNT(*) FROM submissions GROUP BY state").fetchall())


def _audit(
    db: sqlite_utils.Database,
    now: float,
    who: SubmissionRequest | Submission,
    detail: dict[str, Any],
    result: str,
) -> None:
    db.execute(
        "INSERT INTO audit (at, team_id, user_id, cluster_user, action, detail, result) "
        "VALUES (?, ?, ?, ?, 'submit', ?, ?)",
        [now, who.team_id, who.user_id, who.cluster_user, json.dumps(detail), result],
    )


def _select(db: sqlite_utils.Database, where: str, params: list[Any]) -> list[Submission]:
    rows = db.query(
        "SELECT id, team_id, user_id, cluster_user, script, options, tag, state, response_url, "
        "created_at, attempts, cluster, job_id, error, reported_at, script_text "
        "FROM submissions "
        f"WHERE {where} "
        "ORDER BY id",
        params,
    )
    return [Submission(**{**row, "options": json.loads(row["options"])}) for row in rows]


def start_watchers(
    db: sqlite_utils.Database, cluster: str, job_id: int, comment: str
) -> list[tuple[str, str]]:
    """(team, Slack user) of the submissions of this job that asked for a start DM: by the
    job id the worker recorded, or by the `skybot:TAG` comment the runner gave the job (a
    poll can see the job start before the worker has recorded its id)."""
    tag = comment.removeprefix(COMMENT_PREFIX) if comment.startswith(COMMENT_PREFIX) else None
    rows = db.execute(
        "SELECT team_id, user_id FROM submissions WHERE notify_start = 1 AND cluster = ? "
        "AND (job_id = ? OR tag = ?)",
        [cluster, job_id, tag],
    ).fetchall()
    return [(r[0], r[1]) for r in rows]
