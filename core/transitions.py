"""Deciding which job state changes happened between two polls (pure functions).

squeue is the live truth for jobs it still lists; sacct (from slurmdbd) supplies the final state
of jobs that left squeue between polls, so a job that ran and ended inside one poll interval is
still seen to end. A requeue (preemption on overcap, or `scontrol requeue`) shows up as a higher
restart count, because the job itself goes back to PENDING under the same id.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from core.het_jobs import missing_components, with_components
from core.records import FINAL_STATES, EarlierRun, HetComponent, Job, stopped_run

REQUEUED = "REQUEUED"
# How long a het job's end waits for sacct to list every component's end once squeue no
# longer lists the job (slurmdbd learns of each component's end on its own, through a queue);
# past it the end is told with the missing components as skybot last saw them.
HET_END_WAIT_SECONDS = 120.0


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


class KnownJobs(Protocol):
    """What the store knows of the jobs a poll observed (store/slurm_writes.py answers)."""

    def states(self, job_ids: Sequence[int]) -> tuple[dict[int, KnownState], set[int]]:
        """The states last recorded for these jobs, and which jobs' stored state is not a
        state (the store keeps whatever a row was given)."""
        ...

    def listed_now(self, job_ids: Sequence[int]) -> set[int]:
        """Which of these jobs squeue lists after this poll."""
        ...

    def last_seen(self, job_ids: Sequence[int]) -> Mapping[int, Job]:
        """Each job as skybot last saw it (see `with_last_seen`)."""
        ...

    def last_allocated_gpus(self, job_ids: Sequence[int]) -> Mapping[int, dict[str, int]]:
        """The GPUs each job was last seen holding (see `with_gpus`)."""
        ...

    def history_start(self) -> float:
        """When the store first watched Slurm (see `ended_before`)."""
        ...


@dataclass(frozen=True, slots=True)
class Settled:
    """One poll's transitions, and the jobs whose states the store keeps for the next poll.

    `unreadable` and `incomparable` are the jobs left out (their stored state is not a
    state; their states cannot be compared), for the store to name: one bad row must not
    cost every other job its transition.
    """

    states: Mapping[int, Job]
    transitions: list[Transition]
    unreadable: list[int] = field(default_factory=list)
    incomparable: list[int] = field(default_factory=list)


def settle_transitions(
    observed: Iterable[Job], known_jobs: KnownJobs, at: float | None = None
) -> Settled:
    """The transitions `observed` (one record per job, see `merge_observations`) makes from
    what the store knows, each end told with everything skybot saw of the job. `at`, when
    the poll was taken, bounds how long a het job's end waits for its components' ends
    (`whole_het_ends`)."""
    jobs = {job.job_id: job for job in observed}
    known, unreadable_ids = known_jobs.states(list(jobs))
    unreadable = sorted(unreadable_ids.intersection(jobs))
    for job_id in unreadable:
        del jobs[job_id]
    jobs = with_known_restarts(known, jobs)
    ended = ending_without_squeue(known, jobs, live_ids=())
    listed = known_jobs.listed_now(ended)
    told_by_sacct = [job_id for job_id in ended if job_id not in listed]
    if told_by_sacct:
        last_seen = known_jobs.last_seen(told_by_sacct)
        jobs = whole_het_ends(with_last_seen(jobs, last_seen), last_seen, at)
    missing_gpus = awaiting_gpus(known, jobs)
    if missing_gpus:
        jobs = with_gpus(jobs, known_jobs.last_allocated_gpus(missing_gpus))
    start = known_jobs.history_start()
    incomparable: list[int] = []
    transitions = [
        t for t in detect_transitions(known, jobs, incomparable) if not ended_before(t, start)
    ]
    for job_id in incomparable:
        del jobs[job_id]
    return Settled(jobs, transitions, unreadable, incomparable)


def merge_observations(
    live: Iterable[Job], accounted: Iterable[Job], left_out: list[Job] | None = None
) -> dict[int, Job]:
    """One record per job: squeue's for jobs it lists, sacct's for the rest.

    sacct only adds what squeue cannot say: the final state of a job squeue no longer lists
    (or lists as still completing), and the exit code and usage squeue's record lacks.
    A sacct record that cannot stand for its job is left out, and added to `left_out` for
    the caller to name: the merge holds no record for that job id then, unless squeue's.
    """
    merged = {job.job_id: job for job in live}
    for job in accounted:
        if not (job.partition and job.user and job.account):
            # slurmdbd's first record of a job (name "allocation", no partition) is written
            # before the controller's details arrive; the next poll re-reads it complete.
            if left_out is not None:
                left_out.append(job)
            continue
        seen = merged.get(job.job_id)
        earlier = _run_before(seen, job) if seen is not None else None
        if seen is not None and earlier is not None:
            # Only sacct lists the runs before the live one: how the last one was stopped.
            seen = merged[job.job_id] = replace(seen, earlier_run=earlier)
        if seen is None and job.state == "PENDING":
            # A run `scontrol requeue` stopped, of a job squeue does not list (yet): squeue
            # is the word on jobs in the queue.
            continue
        if seen is None:
            # Requeued runs appear in sacct as PREEMPTED although the job lives on in squeue;
            # a job squeue no longer lists has only sacct's word.
            merged[job.job_id] = job
        elif job.is_final and seen.is_active and missing_components(job, seen):
            # sacct has some components' ends, squeue still runs others: not ended yet.
            continue
        elif job.is_final and seen.state == "COMPLETING":
            # What sacct leaves empty (22.05: the output path; the batch host) is squeue's.
            merged[job.job_id] = with_gaps_filled(job, seen)
        elif job.is_final and seen.is_final:
            # squeue keeps an ended job for MinJobAge; sacct adds its exit code and usage,
            # and the GPUs it held where squeue's record of the ended job names none.
            if seen.exit_code is None:
                seen = replace(seen, exit_code=job.exit_code, exit_signal=job.exit_signal)
            if seen.usage is None and job.usage is not None:
                seen = replace(seen, usage=job.usage)
            if not seen.gpus_by_type and job.gpus_by_type:
                seen = replace(seen, gpus_by_type=dict(job.gpus_by_type))
            if not seen.shards_by_type and job.shards_by_type:
                seen = replace(seen, shards_by_type=dict(job.shards_by_type))
            merged[job.job_id] = seen
    return merged


def _run_before(live: Job, accounted: Job) -> EarlierRun | None:
    """The run before squeue's, as sacct lists it. Right after a requeue sacct may not list
    the new run yet: its latest record is then the stopped run itself (ended, one restart
    behind squeue)."""
    if not live.restarts:
        return None
    if accounted.restarts == live.restarts:
        return accounted.earlier_run
    stopped = accounted.state in FINAL_STATES or accounted.state == "PENDING"
    if accounted.restarts == live.restarts - 1 and accounted.end_time and stopped:
        return stopped_run(accounted)
    return None


def with_known_restarts(
    known: Mapping[int, KnownState], observed: Mapping[int, Job]
) -> dict[int, Job]:
    """`observed` with no job's restart count below what was already seen.

    22.05's sacct has no restart count: it is counted from the runs inside sacct's window,
    so once the window slides past a preempted run the job seems to have restarted less. A
    count that went down would look like a new run, and its end would be announced again.
    """
    lifted = dict(observed)
    for job_id, job in observed.items():
        before = known.get(job_id)
        if before is not None and job.restarts < before.restarts:
            lifted[job_id] = replace(job, restarts=before.restarts)
    return lifted


def awaiting_gpus(known: Mapping[int, KnownState], observed: Mapping[int, Job]) -> list[int]:
    """Jobs about to be announced whose record cannot say what they ran on.

    Slurm empties a finished job's gres_detail, so unless accounting tracks gres/gpu an end
    record names no GPUs; a requeued job waiting to run again lists the GPUs it asks for,
    not those of the run that was stopped. The store fills both in from what it saw the
    job holding (`with_gpus`).
    """
    return [
        job_id
        for job_id, job in observed.items()
        if (job.is_final and not job.gpus_by_type and _is_news(known.get(job_id), job))
        or (job.state == "PENDING" and _was_requeued(known.get(job_id), job))
    ]


def _is_news(before: KnownState | None, job: Job) -> bool:
    return before is None or before.state != job.state


def _was_requeued(before: KnownState | None, job: Job) -> bool:
    return before is not None and job.restarts > before.restarts


def with_gpus(observed: Mapping[int, Job], gpus: Mapping[int, dict[str, int]]) -> dict[int, Job]:
    """`observed` with the GPUs each job in `gpus` was last seen holding (see
    `awaiting_gpus`); a job whose record names GPUs it holds now keeps its own."""
    filled = dict(observed)
    for job_id, by_type in gpus.items():
        job = filled.get(job_id)
        if job is None or not by_type:
            continue
        if not job.gpus_by_type or job.state == "PENDING":
            filled[job_id] = replace(job, gpus_by_type=dict(by_type))
    return filled


def ending_without_squeue(
    known: Mapping[int, KnownState], observed: Mapping[int, Job], live_ids: Collection[int]
) -> list[int]:
    """Jobs about to be announced as ended from sacct's record alone (squeue no longer lists
    them): the ones whose record may be emptier than what squeue showed of them."""
    return [
        job_id
        for job_id, job in observed.items()
        if job_id not in live_ids and job.is_final and _is_news(known.get(job_id), job)
    ]


def with_last_seen(observed: Mapping[int, Job], last_seen: Mapping[int, Job]) -> dict[int, Job]:
    """sacct's end records completed with what squeue last showed of each job.

    An end is told with everything skybot knows: 22.05's sacct has no output path (a job run
    with `-o /dev/null` would be said to write `slurm-N.out`), and a record written while
    slurmdbd lagged can lack the exit code squeue had. Only empty fields are filled; what
    sacct does say (its final state, exit code, end time) wins.
    """
    filled = dict(observed)
    for job_id, seen in last_seen.items():
        job = filled.get(job_id)
        if job is not None:
            filled[job_id] = with_gaps_filled(job, seen)
    return filled


def whole_het_ends(
    observed: Mapping[int, Job], last_seen: Mapping[int, Job], at: float | None
) -> dict[int, Job]:
    """`observed` without the ends of het jobs that sacct lists only some components of
    (the job keeps its last state: no transition this poll), while they may yet come
    (`HET_END_WAIT_SECONDS`); past that, or with no `at`, the end lists every component,
    the missing ones as last seen. A het job's end DM names every component, once."""
    whole = dict(observed)
    for job_id, seen in last_seen.items():
        job = whole.get(job_id)
        missing = missing_components(job, seen) if job is not None and job.is_final else ()
        if job is None or not missing:
            continue
        if at is not None and job.end_time and at - job.end_time < HET_END_WAIT_SECONDS:
            del whole[job_id]
        else:
            whole[job_id] = with_components(job, missing)
    return whole


def with_gaps_filled(job: Job, seen: Job) -> Job:
    """`job` with each field it leaves empty taken from `seen`, another record of it."""
    gaps = {
        name: getattr(seen, name)
        for name in _FILLABLE
        if getattr(job, name) in (None, "") and getattr(seen, name) not in (None, "")
    }
    if job.exit_code is None and seen.exit_code is not None:
        gaps["exit_code"], gaps["exit_signal"] = seen.exit_code, seen.exit_signal
    if seen.mail_array_tasks and not job.mail_array_tasks:
        gaps["mail_array_tasks"] = True  # sacct's record does not say what mail was asked for
    if job.het_components and seen.het_components:
        components = _components_filled(job.het_components, seen.het_components)
        if components != job.het_components:
            gaps["het_components"] = components
    return replace(job, **gaps) if gaps else job


def _components_filled(
    components: tuple[HetComponent, ...], seen: tuple[HetComponent, ...]
) -> tuple[HetComponent, ...]:
    """A het job's components with the exit codes another record of them knew."""
    known = {c.offset: c for c in seen if c.exit_code is not None}
    return tuple(
        replace(c, exit_code=known[c.offset].exit_code, exit_signal=known[c.offset].exit_signal)
        if c.exit_code is None and c.offset in known
        else c
        for c in components
    )


# The fields an end record may lack that squeue's last record of the job can supply.
_FILLABLE = (
    "std_out",
    "std_err",
    "work_dir",
    "nodes",
    "partition",
    "comment",
    "time_limit_minutes",
    "submit_time",
    "start_time",
    "array_job_id",
    "array_task",
    "output_host",
)


def detect_transitions(
    known: Mapping[int, KnownState],
    observed: Mapping[int, Job],
    left_out: list[int] | None = None,
) -> list[Transition]:
    """State changes from `known` to `observed`, in job id order.

    A requeue is reported as its own REQUEUED transition before the job's new state, so a
    preemption is never hidden behind a PENDING -> RUNNING that looks like nothing happened.
    With `left_out`, a job whose states cannot be compared (a value of the wrong type) is
    added to it and has no transition, rather than costing every other job theirs.
    """
    transitions: list[Transition] = []
    for job_id in sorted(observed):
        try:
            transitions.extend(_transitions_of(known.get(job_id), observed[job_id]))
        except (TypeError, ValueError, AttributeError):
            if left_out is None:
                raise
            left_out.append(job_id)
    return transitions


def _transitions_of(before: KnownState | None, job: Job) -> list[Transition]:
    if before is not None and before.state == job.state and before.restarts == job.restarts:
        return []
    transitions = []
    if before is not None and job.restarts > before.restarts:
        transitions.append(Transition(job, before.state, REQUEUED, job.restarts))
        if job.state == "PENDING":
            return transitions
        before = KnownState("PENDING", job.restarts)
    if before is not None and before.state in _TERMINAL and before.restarts == job.restarts:
        # A final state is final: a stale squeue line must not resurrect the job.
        return transitions
    transitions.append(Transition(job, before.state if before else None, job.state, job.restarts))
    return transitions


def ended_before(transition: Transition, history_start: float) -> bool:
    """Whether this is a job first seen already ended, before skybot watched Slurm: nobody's
    news. A fresh store's first squeue still lists jobs that ended minutes ago (MinJobAge),
    and their ends must not be announced as if they had just happened."""
    job = transition.job
    return (
        transition.from_state is None
        and job.is_final
        and job.end_time is not None
        and 0 < job.end_time < history_start
    )


# PREEMPTED is left out: under PreemptMode=REQUEUE the same job id runs again.
_TERMINAL = FINAL_STATES - {"PREEMPTED"}
