"""Pending jobs' priorities and their factors, as `squeue` and `sprio` state them, read with the
limits (scheduler/slurm/poller.py `poll_limits`) rather than kept in job records: a multifactor
site recomputes every pending job's priority every few minutes, which would rewrite every
pending job's row (scheduler/slurm/pending_changes.py leaves it out for that reason).

`/sky why` places a job pending on Priority among the jobs that compete for the same partition
and GPUs, counts the GPUs they ask for, and names the factor that holds it back."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

# `squeue --states=PENDING` and `sprio` formats: job id, then the weighted factors (%A age,
# %F fair-share, %J job size, %P partition, %Q QOS) and the priority (%Y).
SQUEUE_FORMAT = "%A|%Q"
SPRIO_FORMAT = "%i|%A|%F|%J|%P|%Q|%Y"
# sprio's answer where priority/basic runs: no factors to read, not a failure.
NOT_MULTIFACTOR = "not running a supported priority plugin"


@dataclass(frozen=True, slots=True)
class PriorityFactors:
    """Weighted factors as sprio prints them (or, for the weights, the largest each can be)."""

    age: int = 0
    fairshare: int = 0
    job_size: int = 0
    partition: int = 0
    qos: int = 0


# Each factor's name in words, and what holds a job back when it is low.
FACTOR_WORDS = {
    "age": ("age", "it has not waited long yet (age grows while it waits)"),
    "fairshare": ("fair-share", "its lab's recent use of the cluster is high"),
    "job_size": ("job size", "its size counts for little here"),
    "partition": ("partition", "its partition's priority is low"),
    "qos": ("QOS", "its QOS's priority is low"),
}


@dataclass(frozen=True, slots=True)
class PendingPriority:
    """One pending job's priority (squeue's) and its factors (sprio's; None without them)."""

    job_id: int
    priority: int
    factors: PriorityFactors | None = None


def parse_squeue_priorities(text: str) -> dict[int, int]:
    """Lines of SQUEUE_FORMAT: job id -> priority."""
    found = {}
    for line in text.splitlines():
        job, _, priority = line.strip().partition("|")
        if job.isdigit() and priority.isdigit():
            found[int(job)] = int(priority)
    return found


class _SetNumber(msgspec.Struct, gc=False):
    """24.x's number: {"set", "infinite", "number"}."""

    set: bool = True
    number: int = 0


class _QueuedJob(msgspec.Struct, gc=False):
    """What of a jobs document's record the priorities need: 22.05's state is a name and its
    priority a number; 23.02+'s state a list of flags (the base state first) and its
    priority a set number (v0.0.40+)."""

    job_id: int = 0
    job_state: str | list[str] | None = None
    priority: int | _SetNumber | None = None


class _JobsDocument(msgspec.Struct, gc=False):
    jobs: list[_QueuedJob] = []


def parse_jobs_priorities(document: bytes) -> dict[int, int]:
    """A jobs document as slurmrestd (or `squeue --json`) sends it: each pending record's job
    id -> priority, as SQUEUE_FORMAT's listing has them. Only these fields are decoded, so a
    queue's document costs a fraction of its full decode."""
    found = {}
    for job in msgspec.json.decode(document, type=_JobsDocument).jobs:
        state = job.job_state[0] if isinstance(job.job_state, list) else job.job_state
        if state != "PENDING" or not job.job_id:
            continue
        priority = job.priority
        if isinstance(priority, _SetNumber):
            if not priority.set:
                continue
            priority = priority.number
        if priority is not None:
            found[job.job_id] = priority
    return found


def record_priority(record: object) -> tuple[int, int] | None:
    """(job id, priority) of a pending record of a decoded jobs document (core.slurm_decode:
    24.x's priority a set number, 22.05's a number); None for any other record."""
    if not isinstance(record, dict):
        return None
    state = record.get("job_state")
    job_id, priority = record.get("job_id"), record.get("priority")
    if (state[0] if isinstance(state, list) and state else state) != "PENDING":
        return None
    if isinstance(priority, dict):  # 24.x: {"set", "infinite", "number"}
        priority = priority.get("number") if priority.get("set") is True else None
    if type(job_id) is not int or not job_id or type(priority) is not int:
        return None
    return job_id, priority


def _number(text: str) -> int:
    try:
        return round(float(text))
    except ValueError:
        return 0


def parse_sprio(text: str) -> tuple[PriorityFactors | None, dict[int, PriorityFactors]]:
    """`sprio` lines of SPRIO_FORMAT (with `-w`, the "Weights" line): the weights, and each
    job's factors by job id."""
    weights = None
    factors = {}
    for line in text.splitlines():
        parts = [part.strip() for part in line.split("|")]
        if len(parts) < 6:
            continue
        values = PriorityFactors(*(_number(p) for p in parts[1:6]))
        if parts[0] == "Weights":
            weights = values
        elif parts[0].isdigit():
            factors[int(parts[0])] = values
    return weights, factors


def pending_priorities(
    priorities: dict[int, int], factors: dict[int, PriorityFactors]
) -> tuple[PendingPriority, ...]:
    return tuple(
        PendingPriority(job_id, priority, factors.get(job_id))
        for job_id, priority in sorted(priorities.items())
    )


def lowest_factor(factors: PriorityFactors, weights: PriorityFactors) -> str | None:
    """The weighted factor furthest below its most (value / weight), among those the site
    weighs at all; None where it weighs none."""
    shares = {
        name: getattr(factors, name) / weight
        for name in FACTOR_WORDS
        if (weight := getattr(weights, name)) > 0
    }
    return min(shares, key=lambda name: (shares[name], name)) if shares else None
