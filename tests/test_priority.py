"""Priority in numbers (issue 43): a job pending on Priority gets its place among the jobs that
want the same partition and GPUs, the GPUs ahead of it, and the factor that holds it back."""

from __future__ import annotations

from pathlib import Path

from core.priority import (
    PendingPriority,
    PriorityFactors,
    lowest_factor,
    parse_jobs_priorities,
    parse_sprio,
    parse_squeue_priorities,
)
from core.records import Job
from core.slurm_limits import SlurmLimits
from core.view import ClusterView
from handlers.commands.why_explain import explain
from tests.support.factories import job, make_snapshot, make_view

NOW = 1_800_000_000.0
WEIGHTS = PriorityFactors(age=100, fairshare=1000, job_size=100)


def test_sprio_and_squeue_listings() -> None:
    weights, _ = parse_sprio("Weights|100|1000|100|0|0|\n")
    assert weights == WEIGHTS
    _, factors = parse_sprio("12|50|120|10|0|0|180\n13|1.4|999.6|0|0|0|1001\n")
    assert factors == {
        12: PriorityFactors(50, 120, 10),
        13: PriorityFactors(1, 1000, 0),
    }
    assert parse_squeue_priorities("12|180\n13|1001\nbad line\n") == {12: 180, 13: 1001}


def test_the_lowest_factor_is_the_one_furthest_below_its_weight() -> None:
    assert lowest_factor(PriorityFactors(50, 120, 10), WEIGHTS) == "job_size"
    assert lowest_factor(PriorityFactors(50, 120, 90), WEIGHTS) == "fairshare"
    assert lowest_factor(PriorityFactors(1, 2, 3), PriorityFactors()) is None


def _view(weights: PriorityFactors | None = WEIGHTS) -> tuple[ClusterView, Job]:
    pending = [
        # Ahead of 20: higher priority, same partition and GPU type (or untyped).
        job(10, state="PENDING", reason="Resources", gpus_by_type={"a40": 4}),
        job(11, state="PENDING", reason="Priority", gpus_by_type={"": 2}),
        # Equal priority, lower id: ahead too (Slurm's tie-break).
        job(12, state="PENDING", reason="Priority", gpus_by_type={"a40": 1}),
        # Not competing: another partition, another GPU type, or behind.
        job(13, state="PENDING", partition="kira-lab", gpus_by_type={"a40": 1}),
        job(14, state="PENDING", gpus_by_type={"rtx_6000": 1}),
        job(21, state="PENDING", reason="Priority", gpus_by_type={"a40": 1}),
    ]
    asked = job(20, state="PENDING", reason="Priority", gpus_by_type={"a40": 2})
    priorities = {10: 900, 11: 800, 12: 500, 13: 2000, 14: 2000, 20: 500, 21: 100}
    pending_priorities = tuple(
        PendingPriority(
            i, p, PriorityFactors(age=40, fairshare=100, job_size=60) if i == 20 else None
        )
        for i, p in priorities.items()
    )
    limits = SlurmLimits(pending=pending_priorities, weights=weights)
    snapshot = make_snapshot(jobs=(*pending, asked), limits=limits)
    return make_view(snapshot), asked


def test_why_gives_the_place_the_gpus_ahead_and_the_lowest_factor() -> None:
    view, asked = _view()
    text = "\n".join(explain(view, asked, NOW))
    assert (
        "By Slurm's priority (500) it is number 4 of the 5 pending jobs that want "
        "`hoffman-lab` and `a40:2`: the 3 jobs ahead of it ask for 7 GPUs."
    ) in text
    assert (
        "Its priority factors (sprio): age 40 of 100, fair-share 100 of 1000, job size 60 of 100."
        in text
    )
    assert "The lowest is fair-share: its lab's recent use of the cluster is high." in text
    assert "What may help: a shorter `--time`" in text and "fewer GPUs than its 2" in text


def test_without_weights_it_says_none_weighs_and_without_priorities_it_gives_no_numbers() -> None:
    view, asked = _view(PriorityFactors())
    text = "\n".join(explain(view, asked, NOW))
    assert "weighs none of Slurm's priority factors" in text
    view, asked = _view(None)
    assert "priority factors" not in "\n".join(explain(view, asked, NOW))
    bare = make_view(make_snapshot(jobs=(asked,)))
    assert "By Slurm's priority" not in "\n".join(explain(bare, asked, NOW))


RECORDED = Path(__file__).parent / "fixtures" / "slurm" / "restd" / "v0.0.42"


def test_slurmrestds_pending_priorities_are_squeues() -> None:
    """One moment of the 24.11 test cluster (record_priority.sh): slurmrestd's jobs answer
    gives each pending job the priority squeue gives it, and nothing for the running job."""
    from_restd = parse_jobs_priorities((RECORDED / "priority_jobs.json").read_bytes())
    from_squeue = parse_squeue_priorities((RECORDED / "priority_squeue.txt").read_text())
    assert from_restd == from_squeue and len(from_restd) == 3, (from_restd, from_squeue)
    # And the priority is the sum of sprio's weighted factors (its last column).
    _, factors = parse_sprio((RECORDED / "priority_sprio.txt").read_text())
    for job_id, priority in from_restd.items():
        f = factors[job_id]
        assert abs(f.age + f.fairshare + f.job_size + f.partition + f.qos - priority) <= 1


def test_a_22_05_jobs_answer_and_an_unset_priority() -> None:
    legacy = (RECORDED.parent / "v0.0.38" / "jobs.json").read_bytes()
    assert parse_jobs_priorities(legacy) == {1896: 0}  # the held job: priority 0, as squeue
    unset = b'{"jobs": [{"job_id": 7, "job_state": ["PENDING"], "priority": {"set": false}}]}'
    assert parse_jobs_priorities(unset) == {}
