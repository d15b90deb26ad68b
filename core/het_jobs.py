"""Heterogeneous jobs as one job (pure functions).

`sbatch` with `#SBATCH hetjob` separators submits one job in several components, each with
resources of its own. Slurm lists each component as a record of its own job id (22.05 and
24.11 alike: `4` and `5` for the job `4`, shown by squeue as `4+0` and `4+1`), with
`het_job_id` (the first component's id) and `het_job_offset`. For its user it is one job:
one script, one output file (the first component's, `%j` its id), and `scancel 4` cancels
every component (seen on both test clusters). So skybot folds the components into one
record of the het job's id, before anything is stored: one row, one end, one Cancel.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from core.notice_text import format_gpus
from core.records import FINAL_STATES, HetComponent, Job
from core.slack_text import literal

# Which active state a het job shows when its components differ: the one holding most.
_ACTIVE_ORDER = ("RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "PENDING")


def fold_het_jobs(jobs: Iterable[Job]) -> list[Job]:
    """`jobs` with each het job's component records replaced by one record of the het job,
    where its first component was listed. Other jobs are passed through as they are."""
    folded: list[Job | int] = []
    components: dict[int, list[Job]] = {}
    for job in jobs:
        het_id = job.het_job_id
        if het_id is None or job.het_components:
            folded.append(job)
            continue
        if het_id not in components:
            components[het_id] = []
            folded.append(het_id)
        components[het_id].append(job)
    if not components:
        return [job for job in folded if isinstance(job, Job)]
    return [job if isinstance(job, Job) else het_job(job, components[job]) for job in folded]


def het_job(het_id: int, records: Sequence[Job]) -> Job:
    """One record for the het job `het_id` from its components' records.

    The leader (offset 0) gives what the job is to its user: name, owner, account,
    partition, output path, script's exit code. GPUs are the components' sum; nodes all of
    theirs. The state is an active one while any component is active; once all have ended,
    the leader's, unless the leader completed and another component did not: a failure
    anywhere in the job is told."""
    ordered = sorted(records, key=lambda job: (job.het_offset or 0, job.job_id))
    leader = next((job for job in ordered if job.job_id == het_id), ordered[0])
    teller = _telling_component(leader, ordered)
    # While a component still completes, the exit code of those that ended is kept: 22.05's
    # sacct cannot give it (SUCCESS/0 for `exit 3`), and the ended job's merge needs it.
    exit_from = teller
    if teller.exit_code is None and teller.exit_signal is None:
        exit_from = next((job for job in (leader, *ordered) if job.exit_code is not None), teller)
    gpus: dict[str, int] = {}
    for job in ordered:
        for gpu_type, count in job.gpus_by_type.items():
            gpus[gpu_type] = gpus.get(gpu_type, 0) + count
    shards: dict[str, int] = {}
    for job in ordered:
        for gpu_type, count in job.shards_by_type.items():
            shards[gpu_type] = shards.get(gpu_type, 0) + count
    nodes = list(dict.fromkeys(job.nodes for job in ordered if job.nodes))
    starts = [job.start_time for job in ordered if job.start_time]
    ends = [job.end_time for job in ordered if job.end_time]
    return replace(
        leader,
        job_id=het_id,
        state=teller.state,
        reason=leader.reason or teller.reason,
        gpus_by_type=gpus,
        shards_by_type=shards,
        nodes=",".join(nodes),
        start_time=min(starts) if starts and teller.state != "PENDING" else leader.start_time,
        end_time=max(ends) if ends and teller.is_final else leader.end_time,
        restarts=max(job.restarts for job in ordered),
        exit_code=exit_from.exit_code,
        exit_signal=exit_from.exit_signal,
        het_job_id=het_id,
        het_offset=None,
        het_components=tuple(_component(job) for job in ordered),
    )


def _telling_component(leader: Job, ordered: Sequence[Job]) -> Job:
    active = [job for job in ordered if job.is_active]
    if active:
        if leader.is_active:
            return leader
        return min(active, key=lambda job: _ACTIVE_ORDER.index(job.state))
    if all(job.is_final for job in ordered) and leader.state == "COMPLETED":
        return next((job for job in ordered if job.state != "COMPLETED"), leader)
    return leader


def _component(job: Job) -> HetComponent:
    return HetComponent(
        offset=job.het_offset or 0,
        job_id=job.job_id,
        state=job.state,
        partition=job.partition,
        gpus_by_type=dict(job.gpus_by_type),
        nodes=job.nodes,
        exit_code=job.exit_code,
        exit_signal=job.exit_signal,
    )


def missing_components(job: Job, seen: Job) -> tuple[HetComponent, ...]:
    """The components `seen` (an earlier record of the het job) lists and `job` does not."""
    have = {component.offset for component in job.het_components}
    return tuple(c for c in seen.het_components if c.offset not in have)


def with_components(job: Job, extra: Sequence[HetComponent]) -> Job:
    """`job` listing `extra` components too, in offset order."""
    components = sorted((*job.het_components, *extra), key=lambda c: c.offset)
    return replace(job, het_components=tuple(components))


def component_label(het_id: int, component: HetComponent) -> str:
    """How Slurm names a component: `1234+1`."""
    return f"{het_id}+{component.offset}"


# Most components shown in one line; a het job rarely has more than a handful.
_SHOWN_COMPONENTS = 8


def components_line(job: Job) -> str:
    """Each component of a het job and how it stands or ended, as mrkdwn: "Components:
    4+0 failed (exit 3) on baymax, a40:1 · 4+1 cancelled on clippy, a40:2"."""
    parts = [_component_text(job.job_id, c) for c in job.het_components[:_SHOWN_COMPONENTS]]
    more = len(job.het_components) - _SHOWN_COMPONENTS
    if more > 0:
        parts.append(f"and {more} more")
    return "Components: " + " · ".join(parts)


def _component_text(het_id: int, component: HetComponent) -> str:
    state = component.state.lower().replace("_", " ")
    if component.state in FINAL_STATES and component.state != "COMPLETED":
        if component.exit_signal:
            state += f" (signal {component.exit_signal})"
        elif component.exit_code:
            state += f" (exit {component.exit_code})"
    where = f" on {literal(component.nodes, 60)}" if component.nodes else ""
    gpus = f", {format_gpus(component.gpus_by_type)}" if component.gpus_by_type else ""
    return f"{literal(f'{component_label(het_id, component)} {state}')}{where}{gpus}"
