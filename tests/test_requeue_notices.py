"""A job Slurm requeues is told as requeued, never as ended (issue 40): squeue's
["NODE_FAIL", "REQUEUED"] (which a controller restart can produce) was read as a node failure,
so its owner was told "resubmit your job", then "requeued" one poll later."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.config_schema import Config
from core.job_notices import Seen, decide_job_notice
from core.records import Job
from core.slurm_decode import decode_slurm_json
from core.slurm_json import parse_squeue
from core.transitions import KnownState, detect_transitions
from scheduler.slurm.job_states import job_states

V42 = Path(__file__).parent / "fixtures" / "slurm" / "v0.0.42"
JOB = 7  # alice's train-a40, RUNNING with 2 a40s


def _polled(state: list[str], restarts: int) -> Job:
    squeue = json.loads((V42 / "squeue.json").read_text())
    record = next(job for job in squeue["jobs"] if job["job_id"] == JOB)
    record["job_state"], record["restart_cnt"] = state, restarts
    (job,) = [j for j in parse_squeue(decode_slurm_json(json.dumps(squeue).encode())).records
              if j.job_id == JOB]  # fmt: skip
    return job


@pytest.mark.parametrize("counted_at_once", [False, True])
def test_a_requeue_after_a_node_failure_never_says_resubmit(counted_at_once: bool) -> None:
    # Slurm may count the restart in the same record that carries the flag, or only once
    # the job is back in the queue.
    polls = [
        _polled(["NODE_FAIL", "REQUEUED"], 1 if counted_at_once else 0),
        _polled(["PENDING"], 1),
    ]
    known = {JOB: KnownState("RUNNING", 0)}
    texts = []
    for job in polls:
        for transition in detect_transitions(known, {JOB: job}):
            notice = decide_job_notice(
                transition, "all", Seen(job.submit_time or 0.0), Config(), Config().default_cluster
            )
            if notice is not None:
                texts.append(notice.text)
        known = {JOB: KnownState(job.state, job.restarts)}
    assert len(texts) == 1, texts
    assert "requeued" in texts[0] and "resubmit" not in texts[0].lower(), texts


def test_a_states_only_poll_fetches_a_requeued_job_rather_than_dropping_it() -> None:
    """24.x's states-only listing: a job listed as ["NODE_FAIL", "REQUEUED"] is still in the
    queue (its record is fetched and read as above), not ended for sacct to tell."""
    plain = b'{"jobs": [{"job_id": "7", "state": ["NODE_FAIL", "REQUEUED"]},'
    plain += b' {"job_id": "8", "state": ["NODE_FAIL"]}]}'
    assert set(job_states(plain)) == {"7"}
    loose = plain.replace(b'"job_id": "7"', b'"job_id": 7')  # the general decoder's shape
    assert set(job_states(loose)) == {"7"}
