from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from core.records import Job
from core.transitions import (
    REQUEUED,
    KnownState,
    detect_transitions,
    ending_without_squeue,
    merge_observations,
    settle_transitions,
    with_last_seen,
)
from tests.support.factories import job


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


def test_an_end_told_by_sacct_alone_keeps_what_squeue_showed() -> None:
    seen = job(7, std_out="/dev/null", nodes="clippy", exit_code=2, exit_signal=0, comment="x")
    # 22.05's sacct: no output path, and (while slurmdbd lags) no exit code yet.
    told = job(7, state="FAILED", std_out="", work_dir="/tmp", nodes="", end_time=500)
    merged = with_last_seen({7: told}, {7: seen})[7]
    assert (merged.state, merged.std_out, merged.work_dir, merged.nodes) == (
        "FAILED",
        "/dev/null",
        "/tmp",
        "clippy",
    )
    assert (merged.exit_code, merged.exit_signal, merged.end_time) == (2, 0, 500)


def test_what_sacct_does_say_wins_over_squeue() -> None:
    seen = job(7, std_out="/old/%j.out", exit_code=0)
    told = job(7, state="FAILED", std_out="/new/%j.out", exit_code=4)
    merged = with_last_seen({7: told}, {7: seen})[7]
    assert (merged.std_out, merged.exit_code) == ("/new/%j.out", 4)


def test_only_news_from_sacct_alone_is_completed() -> None:
    known = {1: KnownState("RUNNING", 0), 2: KnownState("FAILED", 0), 3: KnownState("RUNNING", 0)}
    observed = {
        1: job(1, state="FAILED"),  # ended, squeue no longer lists it: completed
        2: job(2, state="FAILED"),  # already told
        3: job(3, state="COMPLETED"),  # squeue still lists it: its own record is complete
        4: job(4, state="RUNNING"),
    }
    assert ending_without_squeue(known, observed, live_ids={3, 4}) == [1]


@dataclass
class FakeStore:
    """What a store knows, as plain data (core's `KnownJobs`); records what it was asked."""

    known: dict[int, KnownState] = field(default_factory=dict)
    unreadable: set[int] = field(default_factory=set)
    listed: set[int] = field(default_factory=set)
    seen: dict[int, Job] = field(default_factory=dict)
    held_gpus: dict[int, dict[str, int]] = field(default_factory=dict)
    start: float = 0.0
    asked: list[tuple[str, list[int]]] = field(default_factory=list)

    def states(self, job_ids: Sequence[int]) -> tuple[dict[int, KnownState], set[int]]:
        self.asked.append(("states", sorted(job_ids)))
        return {i: s for i, s in self.known.items() if i in job_ids}, self.unreadable

    def listed_now(self, job_ids: Sequence[int]) -> set[int]:
        self.asked.append(("listed_now", sorted(job_ids)))
        return self.listed.intersection(job_ids)

    def last_seen(self, job_ids: Sequence[int]) -> Mapping[int, Job]:
        self.asked.append(("last_seen", sorted(job_ids)))
        return {i: self.seen[i] for i in job_ids if i in self.seen}

    def last_allocated_gpus(self, job_ids: Sequence[int]) -> Mapping[int, dict[str, int]]:
        self.asked.append(("last_allocated_gpus", sorted(job_ids)))
        return {i: self.held_gpus[i] for i in job_ids if i in self.held_gpus}

    def history_start(self) -> float:
        return self.start


def test_settling_completes_an_end_sacct_alone_told_from_what_the_store_saw() -> None:
    store = FakeStore(
        known={5: KnownState("RUNNING", 0), 6: KnownState("RUNNING", 0)},
        listed={6},
        seen={5: job(5, std_out="/home/alice/5.out")},
        held_gpus={5: {"a40": 2}},
    )
    settled = settle_transitions(
        [job(5, state="FAILED", exit_code=1), job(6, state="COMPLETING")], store
    )
    (end, completing) = settled.transitions
    assert (end.job.job_id, end.from_state, end.to_state) == (5, "RUNNING", "FAILED")
    assert end.job.std_out == "/home/alice/5.out"
    assert end.job.gpus_by_type == {"a40": 2}
    assert completing.to_state == "COMPLETING"
    # Only the ended job squeue no longer lists is looked up: job 6 is not final.
    assert ("last_seen", [5]) in store.asked
    assert sorted(settled.states) == [5, 6]


def test_settling_leaves_out_a_job_whose_stored_state_is_unreadable() -> None:
    store = FakeStore(unreadable={7, 99})
    settled = settle_transitions([job(7, state="RUNNING"), job(8, state="RUNNING")], store)
    assert settled.unreadable == [7]
    assert [t.job.job_id for t in settled.transitions] == [8]
    assert sorted(settled.states) == [8]


def test_settling_tells_no_end_from_before_the_store_watched() -> None:
    store = FakeStore(start=2000.0)
    ended = job(9, state="COMPLETED", end_time=1500)
    settled = settle_transitions([ended], store)
    assert settled.transitions == []
    # Its state is still kept: the next poll must not find it new either.
    assert list(settled.states) == [9]
