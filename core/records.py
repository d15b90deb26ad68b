"""Plain typed records: what every part of skybot knows about the cluster.

Parsers in `core.slurm_json` and `core.disk_usage` produce these; the store persists them;
handlers and watchers read them. They carry no Slurm-version quirks: those stay in the parsers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

# Job states after Slurm's flags (e.g. "+REQUEUED") are split off.
ACTIVE_STATES = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"})
FINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "TIMEOUT",
        "CANCELLED",
        "OUT_OF_MEMORY",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
    }
)


@dataclass(frozen=True, slots=True)
class JobUsage:
    """What an ended job used, as sacct reports it; None where sacct does not say."""

    elapsed_seconds: int
    cpus: int | None = None
    cpu_seconds: float | None = None
    mem_requested_bytes: int | None = None
    mem_peak_bytes: int | None = None
    time_limit_minutes: int | None = None
    gpu_util_percent: float | None = None


@dataclass(frozen=True, slots=True)
class EarlierRun:
    """How a requeued job's previous run ended, as sacct --duplicates records that run: its
    state tells who requeued it (PREEMPTED: a job with priority; NODE_FAIL: its node; REQUEUED:
    `scontrol requeue` by an admin or its owner), and its times are Slurm's own."""

    state: str
    start_time: int | None = None
    end_time: int | None = None


@dataclass(frozen=True, slots=True)
class HetComponent:
    """One component (`1234+1`) of a heterogeneous job, as its own Slurm record has it."""

    offset: int
    job_id: int
    state: str
    partition: str = ""
    gpus_by_type: dict[str, int] = field(default_factory=dict)
    nodes: str = ""
    exit_code: int | None = None
    exit_signal: int | None = None


@dataclass(frozen=True, slots=True)
class Job:
    """One Slurm job (or one array task) as the scheduler reports it."""

    job_id: int
    name: str
    user: str
    account: str
    partition: str
    state: str
    reason: str = ""
    # GPUs by type; "" is the key for GPUs of no stated type. Allocated GPUs once the job
    # runs, requested GPUs while it pends.
    gpus_by_type: dict[str, int] = field(default_factory=dict)
    nodes: str = ""
    array_job_id: int | None = None
    array_task: str | None = None
    submit_time: int | None = None
    start_time: int | None = None
    end_time: int | None = None
    time_limit_minutes: int | None = None
    restarts: int = 0
    exit_code: int | None = None
    exit_signal: int | None = None
    std_out: str = ""
    work_dir: str = ""
    # --error as given (a pattern); "" means stderr goes to the stdout file.
    std_err: str = ""
    # What an ended job used (sacct's records only; core/efficiency.py reads it).
    usage: JobUsage | None = None
    # The job's --comment; skybot puts "skybot:<tag>" there to find its own submissions.
    comment: str = ""
    # The run before this one, when sacct still lists it (see EarlierRun).
    earlier_run: EarlierRun | None = None
    # The host name Slurm puts for %N in output paths (core/job_output.py): squeue's
    # batch_host (a NodeName), which the poll replaces with that node's NodeHostname.
    output_host: str = ""
    # A heterogeneous job's id (its first component's) and this record's place in it. Slurm
    # lists each component as a job of its own id; core/het_jobs.py folds them into one
    # record of the het job's id, whose `het_components` lists them in offset order.
    het_job_id: int | None = None
    het_offset: int | None = None
    het_components: tuple[HetComponent, ...] = ()
    # GPU shards (gres/shard: parts of a GPU, core/gres_shares.py) by GPU type, the same way.
    shards_by_type: dict[str, int] = field(default_factory=dict)
    # Its QOS, whose limits `/sky why` quotes (squeue's; "" in sacct's records).
    qos: str = ""
    # Whether the job asked Slurm for mail about each array task (`--mail-type=ARRAY_TASKS`):
    # then skybot DMs each task too (core/array_notices.py). squeue shows it from 23.02 on
    # (`mail_type`); 22.05's squeue --json does not, so there it is never set.
    mail_array_tasks: bool = False

    @property
    def gpus(self) -> int:
        return sum(self.gpus_by_type.values())

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES


_UNUSABLE_NODE_FLAGS = ("DOWN", "DRAIN", "FAIL", "MAINT", "NOT_RESPONDING", "INVAL", "FUTURE")


@dataclass(frozen=True, slots=True)
class Node:
    """One compute node with its GPUs (total and allocated) by type."""

    name: str
    state: str
    partitions: tuple[str, ...] = ()
    gpus_total: dict[str, int] = field(default_factory=dict)
    gpus_used: dict[str, int] = field(default_factory=dict)
    cpus: int = 0
    cpus_allocated: int = 0
    # NodeHostname: the name slurmd runs under, which it writes for %N in output paths.
    hostname: str = ""
    # GPUs not given out whole but holding shards (or MPS shares) of jobs: not idle.
    gpus_shared: dict[str, int] = field(default_factory=dict)

    @property
    def gpus_idle(self) -> dict[str, int]:
        if not self.schedulable:
            return {t: 0 for t in self.gpus_total}
        return {
            t: max(0, n - self.gpus_used.get(t, 0) - self.gpus_shared.get(t, 0))
            for t, n in self.gpus_total.items()
        }

    @property
    def schedulable(self) -> bool:
        state = self.state.upper()
        return not any(flag in state for flag in _UNUSABLE_NODE_FLAGS)


@dataclass(frozen=True, slots=True)
class LabCap:
    """A Slurm account's GPU limit (GrpTRES gres/gpu); None means no limit."""

    account: str
    gpu_cap: int | None


@dataclass(frozen=True, slots=True)
class DirectoryUsage:
    """One user directory's weekly disk-usage.txt."""

    root: str
    owner: str
    path: str
    updated: datetime
    kib: int
    human: str

    @property
    def bytes(self) -> int:
        return self.kib * 1024


@dataclass(frozen=True, slots=True)
class FilesystemUsage:
    """Size and fill level of one mounted storage filesystem (from statvfs)."""

    mount: str
    size_bytes: int
    used_bytes: int
    avail_bytes: int

    @property
    def percent_used(self) -> float:
        # Like df: used / (used + available), since root-reserved blocks are not for users.
        usable = self.used_bytes + self.avail_bytes
        return 100.0 * self.used_bytes / usable if usable else 0.0


@dataclass(frozen=True, slots=True)
class ContainerImage:
    """One Enroot image (`*.sqsh`) in the image directory and what its .packages list says.

    `packages` holds (name, version) as the list wrote them; the version is "" for a line that
    names a package without one (pip's `name @ URL`). Matching canonicalises at query time.
    """

    name: str
    size_bytes: int = 0
    # The list's file name, None when the image has none.
    packages_file: str | None = None
    packages: tuple[tuple[str, str], ...] = ()
    # Lines of the list that were not `name==version` (skipped, but counted so users know the
    # answer may be incomplete).
    unreadable_lines: int = 0
    # Why the whole list could not be read (a symlink, too large, ...), if so.
    packages_error: str | None = None


@dataclass(frozen=True, slots=True)
class ImageDirectory:
    """Which image directory the storage poller listed, and why it could not, if so."""

    path: str
    error: str | None = None


def stopped_run(run: Job) -> EarlierRun:
    """A run a requeue stopped, from sacct's record of it. sacct writes a run stopped by
    `scontrol requeue` as REQUEUED, which the parsers read as PENDING (the job went back to
    the queue)."""
    state = "REQUEUED" if run.state == "PENDING" else run.state
    return EarlierRun(state, run.start_time, run.end_time)
