"""Deciding which job state changes happened between two polls (pure functions).

squeue is the live truth for jobs it still lists; sacct (from slurmdbd) supplies the final state
of jobs that left squeue between polls, so a job that ran and ended inside one poll interval is
still seen to end. A requeue (preemption on overcap, or `scontrol requeue`) shows up as a higher
restart count, because the job itself goes back to PENDING under the same id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from core.records import FINAL_STATES, Job

REQUEUED = "REQUEUED"


@dataclass(frozen=True, slots=True)
class KnownState:
    state: str
    restarts: int


@dataclass(frozen=True, slots=True)
class Transition:
    job: Job
    from_state: str | None
    to_state: str
    restarts: int


def merge_observations(live: Iterable[Job], accounted: Iterable[Job]) -> dict[int, Job]:
    """One record per job: squeue's for jobs it lists, sacct's for the rest or for final states."""
    merged = {job.job_id: job for job in live}
    for job in accounted:
        seen = merged.get(job.job_id)
        if seen is None:
            # Requeued runs appear in sacct as PREEMPTED/REQUEUED although the job lives on;
            # a job squeue no longer lists has only sacct's word.
            merged[job.job_id] = job
        elif job.is_final and seen.state not in _STILL_RUNNING_OR_WAITING:
            # sacct knows the exit code and end time of a job squeue shows as completing.
            merged[job.job_id] = job
    return merged


def detect_transitions(
    known: Mapping[int, KnownState], observed: Mapping[int, Job]
) -> list[Transition]:
    """State changes from `known` to `observed`, in job id order.

    A requeue is reported as its own REQUEUED transition before the job's new state, so a
    preemption is never hidden behind a PENDING -> RUNNING that looks like nothing happened.
    """
    transitions: list[Transition] = []
    for job_id in sorted(observed):
        job = observed[job_id]
        before = known.get(job_id)
        if before is not None and before.state == job.state and before.restarts == job.restarts:
            continue
        if before is not None and job.restarts > before.restarts:
            transitions.append(Transition(job, before.state, REQUEUED, job.restarts))
            if job.state == "PENDING":
                continue
            before = KnownState("PENDING", job.restarts)
        if before is not None and before.state in _TERMINAL and before.restarts == job.restarts:
            # A final state is final: a stale squeue line must not resurrect the job.
            continue
        transitions.append(
            Transition(job, before.state if before else None, job.state, job.restarts)
        )
    return transitions


_STILL_RUNNING_OR_WAITING = frozenset({"PENDING", "RUNNING", "SUSPENDED", "CONFIGURING"})
# PREEMPTED is left out: under PreemptMode=REQUEUE the same job id runs again.
_TERMINAL = FINAL_STATES - {"PREEMPTED"}
