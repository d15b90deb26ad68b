from pathlib import Path

import pytest

from core.config_schema import SubmitConfig
from store.db import open_db
from store.outbox import OutboxMessage
from store.submissions import (
    QueueRefused,
    SubmissionRequest,
    claim_next,
    enqueue,
    find_job_by_comment,
    finish,
    interrupted,
    requeue,
    submission_counts,
)
from tests.support.factories import CLUSTER, job
from tests.support.slurm_polls import save_slurm_poll


def _enqueue(db, now: float, user: str = "alice", **limits: int):  # type: ignore[no-untyped-def]
    return enqueue(
        db,
        CLUSTER,
        SubmissionRequest("T1", "U1", user, "job.sh", {}),
        SubmitConfig(
            max_queued_per_user=limits.get("max_queued", 5),
            max_per_minute=limits.get("max_per_minute", 3),
        ),
        now,
    )


def test_rate_limit_and_queue_cap_per_user(tmp_path: Path) -> None:
    db = open_db(tmp_path / "s.db")
    for i in range(3):
        _enqueue(db, now=100.0 + i)
    with pytest.raises(QueueRefused, match="3 submissions in the last minute"):
        _enqueue(db, now=110.0)
    _enqueue(db, now=110.0, user="bob")  # limits are per user
    with pytest.raises(QueueRefused, match="already have 3 submissions waiting"):
        _enqueue(db, now=200.0, max_queued=3)
    assert len(list(db.query("SELECT * FROM audit WHERE action = 'submit'"))) == 4


def test_claim_finish_and_crash_recovery_bookkeeping(tmp_path: Path) -> None:
    db = open_db(tmp_path / "s.db")
    first = _enqueue(db, now=1.0)
    claimed = claim_next(db, CLUSTER, now=2.0)
    assert claimed is not None and claimed.id == first.id and claimed.attempts == 1
    assert claim_next(db, CLUSTER, now=3.0) is None
    assert [s.id for s in interrupted(db, CLUSTER)] == [first.id]
    # The poller saw a job carrying this submission's tag: that is how a restart finds it.
    save_slurm_poll(db, [job(77, comment=f"skybot:{first.tag}")], [], [], at=4.0)
    assert find_job_by_comment(db, CLUSTER, f"skybot:{first.tag}") == 77
    assert find_job_by_comment(db, CLUSTER, "skybot:0000000000000000") is None
    report = OutboxMessage(key=f"submission:{first.id}", target="U1", text="Submitted")
    done = finish(db, claimed, now=5.0, job_id=77, report=report)
    assert (done.state, done.job_id) == ("submitted", 77)
    # A second report for the same submission is never queued.
    finish(db, claimed, now=6.0, job_id=77, report=report)
    assert db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0] == 1
    requeue(db, first.id)  # only a submission still 'submitting' can go back to the queue
    assert claim_next(db, CLUSTER, now=7.0) is None


def test_submission_counts_by_state(tmp_path: Path) -> None:
    db = open_db(tmp_path / "s.db")
    assert submission_counts(db) == {}
    _enqueue(db, now=100.0)
    _enqueue(db, now=101.0, user="bob")
    claimed = claim_next(db, CLUSTER, now=102.0)
    assert claimed is not None
    assert submission_counts(db) == {"queued": 1, "submitting": 1}
