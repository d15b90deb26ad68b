from core.transitions import REQUEUED, KnownState, detect_transitions, merge_observations
from tests.factories import job


def test_new_jobs_and_state_changes_are_reported_once() -> None:
    observed = {1: job(1, state="PENDING"), 2: job(2, state="RUNNING")}
    first = detect_transitions({}, observed)
    assert [(t.job.job_id, t.from_state, t.to_state) for t in first] == [
        (1, None, "PENDING"),
        (2, None, "RUNNING"),
    ]
    known = {1: KnownState("PENDING", 0), 2: KnownState("RUNNING", 0)}
    assert detect_transitions(known, observed) == []
    later = detect_transitions(known, {2: job(2, state="COMPLETED")})
    assert [(t.from_state, t.to_state) for t in later] == [("RUNNING", "COMPLETED")]


def test_requeue_is_reported_even_when_the_job_is_running_again() -> None:
    known = {7: KnownState("RUNNING", 0)}
    result = detect_transitions(known, {7: job(7, state="RUNNING", restarts=1)})
    assert [(t.from_state, t.to_state, t.restarts) for t in result] == [
        ("RUNNING", REQUEUED, 1),
        ("PENDING", "RUNNING", 1),
    ]


def test_requeued_and_pending_gives_one_requeue() -> None:
    result = detect_transitions(
        {7: KnownState("RUNNING", 0)}, {7: job(7, state="PENDING", restarts=1, reason="BeginTime")}
    )
    assert [(t.to_state, t.restarts) for t in result] == [(REQUEUED, 1)]


def test_a_final_state_is_not_undone_by_a_stale_record() -> None:
    known = {3: KnownState("COMPLETED", 0)}
    assert detect_transitions(known, {3: job(3, state="RUNNING")}) == []


def test_sacct_fills_in_jobs_that_left_squeue() -> None:
    merged = merge_observations([job(1, state="RUNNING")], [job(2, state="FAILED", exit_code=3)])
    assert merged[2].state == "FAILED"
    assert merged[1].state == "RUNNING"


def test_squeue_wins_for_a_live_job_sacct_calls_preempted() -> None:
    live = [job(5, state="PENDING", restarts=1)]
    merged = merge_observations(live, [job(5, state="PREEMPTED")])
    assert merged[5].state == "PENDING"


def test_sacct_final_state_replaces_completing() -> None:
    merged = merge_observations([job(4, state="COMPLETING")], [job(4, state="COMPLETED")])
    assert merged[4].state == "COMPLETED"


def test_squeue_final_record_keeps_its_exit_code_over_sacct() -> None:
    # 22.05's sacct --json reports exit 0 for a job that ran `exit 3`; squeue has it right.
    merged = merge_observations(
        [job(8, state="FAILED", exit_code=3)], [job(8, state="FAILED", exit_code=None)]
    )
    assert merged[8].exit_code == 3


def test_sacct_fills_a_missing_exit_code() -> None:
    merged = merge_observations([job(8, state="FAILED")], [job(8, state="FAILED", exit_code=1)])
    assert merged[8].exit_code == 1


def test_half_written_sacct_records_are_ignored_until_complete() -> None:
    early = job(9, state="FAILED", name="allocation", partition="")
    assert merge_observations([], [early]) == {}
