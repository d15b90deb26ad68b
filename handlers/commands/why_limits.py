"""`/sky why`'s sentences for a job held by a partition's or a QOS' limit, with the limit as the
cluster states it now (core/slurm_limits.py, read on the poll): nothing here knows any site's
partitions or numbers."""

from __future__ import annotations

from core.records import Job
from core.reservations import blocking, minutes_before, window
from core.slurm_limits import PartitionLimits, QosLimits, Reservation, SlurmLimits
from core.view import ClusterView
from handlers.commands.common import format_duration, literal, plural

# Reasons answered here, each from the limit it names.
LIMIT_REASONS = frozenset(
    {
        "PartitionTimeLimit",
        "PartitionNodeLimit",
        "QOSMaxGRESPerUser",
        "QOSMaxWallDurationPerJobLimit",
        "QOSMaxJobsPerUserLimit",
    }
)


# Reasons under which a reservation may be what keeps a job off its nodes.
BLOCKED_REASONS = frozenset({"ReqNodeNotAvail", "Resources", "Reservation"})


def limit_sentence(
    view: ClusterView, job: Job, code: str, job_label: str, now: float
) -> str | None:
    """The sentence for a limit reason, quoting the live limit; None for other reasons."""
    if code == "Reservation" and blocking(view.snapshot.limits, view.snapshot.nodes, job, now):
        # Slurm says "Reservation" too for a job whose time runs into one it is not in.
        return (
            "A reservation on the nodes it can use keeps it waiting (its time limit runs into it)."
        )
    if code not in LIMIT_REASONS:
        return None
    limits = view.snapshot.limits
    if code.startswith("Partition"):
        return _partition_sentence(limits, job, code, job_label)
    return _qos_sentence(view, limits, job, code)


def slurm_time(minutes: int) -> str:
    """Minutes as `--time` takes them: "4:00:00", "2-00:00:00"."""
    days, rest = divmod(minutes, 1440)
    clock = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{clock}" if days else clock


def _partitions(limits: SlurmLimits, job: Job) -> list[PartitionLimits]:
    # A pending job may name several partitions ("a,b").
    found = (limits.partition(name.strip()) for name in job.partition.split(","))
    return [p for p in found if p is not None]


def _partition_sentence(limits: SlurmLimits, job: Job, code: str, job_label: str) -> str | None:
    partitions = _partitions(limits, job)
    where = literal(job.partition)
    if code == "PartitionNodeLimit":
        allowed = [p.max_nodes for p in partitions if p.max_nodes is not None]
        if not allowed:
            return None
        most = plural(max(allowed), "node")
        return f"It asks for more nodes than {where} allows ({most} per job); it will not start."
    minutes = job.time_limit_minutes
    asked = f"{format_duration(minutes * 60)}, " if minutes else ""
    times = [p.max_time_minutes for p in partitions if p.max_time_minutes is not None]
    if not times:
        return None
    longest = max(times)
    command = literal(f"scontrol update JobId={job_label} TimeLimit={slurm_time(longest)}")
    return (
        f"Its time limit ({asked}`--time`) is longer than {where} allows: "
        f"{format_duration(longest * 60)} at most (the partition's MaxTime). It will never "
        f"start as is; lower it to fit with {command}, or cancel it and resubmit with a "
        "shorter `--time`."
    )


def _qos_of(limits: SlurmLimits, job: Job) -> list[QosLimits]:
    """The job's own QOS, then its partitions' QOS: Slurm applies both."""
    names = [job.qos] + [p.qos for p in _partitions(limits, job)]
    found = (limits.qos_named(name) for name in names if name)
    return [q for q in found if q is not None]


def _qos_sentence(view: ClusterView, limits: SlurmLimits, job: Job, code: str) -> str | None:
    """None when no QOS of the job states the limit (the reason's general sentence then)."""
    qos = _qos_of(limits, job)
    if code == "QOSMaxWallDurationPerJobLimit":
        walls = [(q, q.max_wall_minutes) for q in qos if q.max_wall_minutes is not None]
        if not walls:
            return None
        which, wall = min(walls, key=lambda each: each[1])
        return (
            f"Its time limit is longer than its QOS {literal(which.name)} allows "
            f"({format_duration(wall * 60)} at most), so it will never start; resubmit with a "
            "shorter `--time` or another QOS."
        )
    if code == "QOSMaxJobsPerUserLimit":
        jobs = [(q, q.max_jobs_per_user) for q in qos if q.max_jobs_per_user is not None]
        if not jobs:
            return None
        which, most = min(jobs, key=lambda each: each[1])
        return (
            f"You already run as many jobs as the QOS {literal(which.name)} allows one user "
            f"({plural(most, 'job')} at once); it starts when one of them ends."
        )
    gpus = [(q, q.max_gpus_per_user) for q in qos if q.max_gpus_per_user is not None]
    if not gpus:
        return None
    which, most = min(gpus, key=lambda each: each[1])
    using = sum(
        j.gpus
        for j in view.snapshot.jobs
        if j.user == job.user
        and j.is_active
        and j.state != "PENDING"
        and which.name in (j.qos, *(p.qos for p in _partitions(limits, j)))
    )
    held = f"; you use {using} now" if using else ""
    return (
        f"You already use as many GPUs as the QOS {literal(which.name)} allows one user: "
        f"{plural(most, 'GPU')} at once{held}. It starts when one of your jobs under it ends."
    )


def reservation_lines(view: ClusterView, job: Job, code: str, label: str, now: float) -> list[str]:
    """For a job kept off its nodes (BLOCKED_REASONS): the reservations in its way,
    their windows, and the longest `--time` that would let it run before the first."""
    if code not in BLOCKED_REASONS:
        return []
    found = blocking(view.snapshot.limits, view.snapshot.nodes, job, now)
    if not found:
        return []
    lines = [
        f"Reservation {literal(r.name)}{' (maintenance)' if r.maintenance else ''} holds "
        f"{_nodes(r)} {window(r, now)}."
        for r in found[:3]
    ]
    first = found[0]
    minutes = minutes_before(first, now)
    if minutes is None:
        lines.append(f"It can start on those nodes once {literal(first.name)} ends.")
        return lines
    limit = slurm_time(minutes)
    command = literal(f"scontrol update JobId={label} TimeLimit={limit}")
    lines.append(
        f"A time limit of {format_duration(minutes * 60)} or less ends before it starts: "
        f"run {command} (you may lower your own job's limit) and it can start now, if it "
        "finishes in that time."
    )
    return lines


def _nodes(reservation: Reservation) -> str:
    shown = ", ".join(literal(n) for n in reservation.nodes[:5])
    more = f" and {len(reservation.nodes) - 5} more" if len(reservation.nodes) > 5 else ""
    return shown + more if shown else "its nodes"
