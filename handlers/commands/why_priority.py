"""`/sky why` for a job pending on Priority, in numbers: its place among the pending jobs that
want the same partition and GPUs, the GPUs those ahead of it ask for, the factor that holds it
back (sprio's, where priority/multifactor runs), and what may help. All from the priorities the
limits poll read (core/priority.py), never asked of Slurm per command."""

from __future__ import annotations

from core.priority import FACTOR_WORDS, PendingPriority, PriorityFactors, lowest_factor
from core.records import Job
from core.view import ClusterView
from handlers.commands.common import format_job_gpus, literal, plural


def _gpu_kinds(job: Job) -> set[str]:
    return {t for t, n in job.gpus_by_type.items() if n}


def competes(job: Job, other: Job) -> bool:
    """Whether `other` waits for what `job` waits for: a shared partition and, if both ask
    for GPUs, a GPU type in common (an untyped request takes any type)."""
    if not set(job.partition.split(",")) & set(other.partition.split(",")):
        return False
    mine, theirs = _gpu_kinds(job), _gpu_kinds(other)
    if not mine or not theirs or "" in mine or "" in theirs:
        return True
    return bool(mine & theirs)


def ahead_of(job: Job, view: ClusterView, mine: PendingPriority) -> tuple[list[Job], int]:
    """The competing pending jobs Slurm would start first (higher priority; on a tie, the
    lower job id), and how many compete in all."""
    priorities = {p.job_id: p.priority for p in view.snapshot.limits.pending}
    competing = [
        other
        for other in view.snapshot.jobs
        if other.state == "PENDING"
        and other.job_id != job.job_id
        and other.job_id in priorities
        and competes(job, other)
    ]
    ahead = [
        other
        for other in competing
        if (priorities[other.job_id], -other.job_id) > (mine.priority, -job.job_id)
    ]
    return ahead, len(competing)


def priority_lines(view: ClusterView, job: Job, code: str) -> list[str]:
    if code != "Priority":
        return []
    limits = view.snapshot.limits
    mine = limits.priority_of(job.job_id)
    if mine is None:
        return []
    ahead, competing = ahead_of(job, view, mine)
    wanted = format_job_gpus(job.gpus_by_type, job.shards_by_type)
    gpus = sum(j.gpus for j in ahead)
    lines = [
        f"By Slurm's priority ({mine.priority}) it is number {len(ahead) + 1} of the "
        f"{competing + 1} pending jobs that want {literal(job.partition)} and {wanted}: "
        f"the {plural(len(ahead), 'job')} ahead of it {'asks' if len(ahead) == 1 else 'ask'} "
        f"for {plural(gpus, 'GPU')}."
    ]
    if mine.factors is not None and limits.weights is not None:
        lines.append(_factors_line(mine.factors, limits.weights))
    helps = ["a shorter `--time` (the backfill scheduler starts a job early if it ends before "
             "the GPUs ahead of it are needed)"]  # fmt: skip
    if job.gpus > 1:
        helps.append(f"fewer GPUs than its {job.gpus}")
    lines.append("What may help: " + "; ".join(helps) + ".")
    return lines


def _factors_line(factors: PriorityFactors, weights: PriorityFactors) -> str:
    lowest = lowest_factor(factors, weights)
    if lowest is None:
        return (
            "This cluster weighs none of Slurm's priority factors (sprio's weights are all 0): "
            "jobs of equal standing start in the order they were submitted."
        )
    shown = ", ".join(
        f"{FACTOR_WORDS[name][0]} {getattr(factors, name)} of {getattr(weights, name)}"
        for name in FACTOR_WORDS
        if getattr(weights, name) > 0
    )
    word, reason = FACTOR_WORDS[lowest]
    return f"Its priority factors (sprio): {shown}. The lowest is {word}: {reason}."
