"""The submission worker settles what it lost track of by asking the runner, never blind.

A scripted runner stands in for sudo and skybot-runner (the real ones are driven by
tests/test_submit_restart_cluster.py and tests/test_runner_submit_once.py).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from bot.config import load_config
from core.config_schema import SubmitConfig
from core.runner_contract import RunnerReply, RunnerRequest
from scheduler import submit_worker
from scheduler.submit_worker import SubmissionWorker
from store.outbox import outbox_rows
from store.submissions import Submission, SubmissionRequest, claim_next, enqueue, get
from store.writer import StoreWriter
from tests.support.factories import CLUSTER


class ScriptedRunner:
    """Answers each action from a list of replies, and records what it was asked."""

    def __init__(self, **replies: list[RunnerReply]) -> None:
        self.replies = replies
        self.asked: list[RunnerRequest] = []

    async def __call__(self, user: str, request: RunnerRequest, /) -> RunnerReply:
        self.asked.append(request)
        return self.replies[request["action"].replace("-", "_")].pop(0)


async def _interrupted(writer: StoreWriter) -> Submission:
    """A submission left in `submitting`, as a restart finds it."""

    def make(db: Any) -> Submission:
        enqueue(
            db,
            CLUSTER,
            SubmissionRequest("T1", "U1", "alice", "job.sh", {}),
            SubmitConfig(max_queued_per_user=5, max_per_minute=5),
            time.time(),
        )
        claimed = claim_next(db, CLUSTER, time.time())
        assert claimed is not None
        return claimed

    submission: Submission = await writer.run(make)
    return submission


async def _state(writer: StoreWriter, submission: Submission) -> tuple[str, int | None]:
    found = await writer.run(get, submission.id)
    assert found is not None
    return found.state, found.job_id


def _worker(writer: StoreWriter, runner: ScriptedRunner) -> SubmissionWorker:
    config = load_config(None)
    return SubmissionWorker(config.default_cluster, config, writer, runner)


async def test_a_runner_still_at_it_is_waited_for_then_its_job_recorded(
    writer: StoreWriter,
) -> None:
    submission = await _interrupted(writer)
    runner = ScriptedRunner(
        submit_status=[
            {"ok": True, "state": "running"},
            {"ok": True, "state": "submitted", "job_id": 9071},
        ]
    )
    worker = _worker(writer, runner)
    assert await worker.recover() == 0
    assert await _state(writer, submission) == ("submitting", None)
    assert await worker.recover() == 1
    assert await _state(writer, submission) == ("submitted", 9071)
    assert [r["action"] for r in runner.asked] == ["submit-status", "submit-status"]
    assert runner.asked[0]["tag"] == submission.tag
    (told,) = await writer.run(outbox_rows)
    assert "Slurm job *9071*" in told["text"]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"ok": True, "state": "absent"}, ("queued", None)),
        ({"ok": True, "state": "failed", "error": "sbatch: error: bad"}, ("failed", None)),
    ],
)
async def test_absent_is_queued_again_and_a_recorded_refusal_is_reported(
    writer: StoreWriter, status: RunnerReply, expected: tuple[str, None]
) -> None:
    submission = await _interrupted(writer)
    worker = _worker(writer, ScriptedRunner(submit_status=[status]))
    assert await worker.recover() == 1
    assert await _state(writer, submission) == expected


async def test_a_runner_that_cannot_tell_is_asked_again_then_the_user_told_to_look(
    writer: StoreWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    submission = await _interrupted(writer)
    cannot = {"ok": False, "error": "sacct failed", "outcome_unknown": True}
    worker = _worker(writer, ScriptedRunner(submit_status=[cannot, cannot]))
    assert await worker.recover() == 0
    assert await _state(writer, submission) == ("submitting", None)
    monkeypatch.setattr(submit_worker, "UNSURE_GIVE_UP_SECONDS", 0.0)
    assert await worker.recover() == 1
    assert await _state(writer, submission) == ("failed", None)
    (told,) = await writer.run(outbox_rows)
    assert "squeue --me" in told["text"] and "sacct failed" in told["text"]


async def test_a_submit_whose_outcome_is_unknown_stays_for_recovery(writer: StoreWriter) -> None:
    """The runner was killed, or timed out: no "could not submit" that may be false."""

    def queue(db: Any) -> None:
        enqueue(
            db,
            CLUSTER,
            SubmissionRequest("T1", "U1", "alice", "job.sh", {}),
            SubmitConfig(max_queued_per_user=5, max_per_minute=5),
            time.time(),
        )

    await writer.run(queue)
    killed = {"ok": False, "error": "stopped by signal 15", "outcome_unknown": True}
    worker = _worker(writer, ScriptedRunner(submit=[killed]))
    assert await worker.perform_next() is True
    found = await writer.run(get, 1)
    assert found is not None and found.state == "submitting"
    assert await writer.run(outbox_rows) == []
