"""How much of its GPU cap each lab is using, computed from a snapshot (pure functions).

Slurm enforces a lab's GrpTRES on its *account*, whatever partition a job runs in, so GPUs are
counted by account. Overcap work is counted separately: it runs under the shared `overcap`
account, and is attributed to a lab through its users' membership.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from core.records import Job, Node

# Pending reasons that mean "your group's limit is reached", not "the cluster is full".
_CAP_REASON_PREFIXES = ("AssocGrp", "AssocMax", "QOSGrp", "QOSMax")

# Job states whose GPUs count as in use (allocated).
_HOLDING_GPUS = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"})


def is_held_by_cap(job: Job) -> bool:
    return job.state == "PENDING" and job.reason.startswith(_CAP_REASON_PREFIXES)


def holds_gpus(job: Job) -> bool:
    return job.state in _HOLDING_GPUS


@dataclass(frozen=True, slots=True)
class LabUsage:
    lab: str
    account: str
    cap: int | None
    gpus_used: int
    by_user: dict[str, int] = field(default_factory=dict)
    by_type: dict[str, int] = field(default_factory=dict)
    overcap_by_user: dict[str, int] = field(default_factory=dict)
    pending_at_cap: tuple[Job, ...] = ()
    pending: int = 0

    @property
    def headroom(self) -> int | None:
        return None if self.cap is None else max(0, self.cap - self.gpus_used)

    @property
    def at_cap(self) -> bool:
        return self.cap is not None and self.gpus_used >= self.cap

    @property
    def overcap_gpus(self) -> int:
        return sum(self.overcap_by_user.values())


def lab_usage(
    lab: str,
    account: str,
    cap: int | None,
    jobs: Iterable[Job],
    members: Iterable[str] = (),
    overcap_account: str = "overcap",
) -> LabUsage:
    """Usage of one lab from all jobs in the snapshot."""
    return usage_of_labs(
        [LabName(lab, account)], jobs, lambda _: cap, {account: members}, overcap_account
    )[0]


class LabAccount(Protocol):
    """A configured lab as lab usage needs it: its name and the Slurm account of its cap."""

    @property
    def name(self) -> str: ...

    @property
    def account(self) -> str: ...


@dataclass(frozen=True, slots=True)
class LabName:
    """A lab by name and account, where no configured lab is at hand."""

    name: str
    account: str


def usage_of_labs(
    labs: Iterable[LabAccount],
    jobs: Iterable[Job],
    cap_for: Callable[[str], int | None],
    members: Mapping[str, Iterable[str]],
    overcap_account: str,
) -> list[LabUsage]:
    """Usage of every configured lab, in the config's order, from one set of jobs, the caps
    by account and the members by account.

    One pass over the jobs for all labs: at 100,000 jobs a pass per lab (and another over
    overcap's jobs per lab) cost a site with dozens of labs seconds of the bot's time."""
    labs = list(labs)
    tallies = {lab.account: _Tally(set(members.get(lab.account, ()))) for lab in labs}
    overcap_by_user: Counter[str] = Counter()
    for job in jobs:
        tally = tallies.get(job.account)
        if tally is not None:
            tally.add(job)
        if job.account == overcap_account and holds_gpus(job):
            overcap_by_user[job.user] += job.gpus
    return [
        tallies[lab.account].usage(lab.name, lab.account, cap_for(lab.account), overcap_by_user)
        for lab in labs
    ]


class _Tally:
    """One account's jobs, as counted so far; its members grow with its jobs' users."""

    def __init__(self, members: set[str]) -> None:
        self.members = members
        self.by_user: Counter[str] = Counter()
        self.by_type: Counter[str] = Counter()
        self.pending_at_cap: list[Job] = []
        self.pending = 0

    def add(self, job: Job) -> None:
        self.members.add(job.user)
        if holds_gpus(job):
            self.by_user[job.user] += job.gpus
            for gpu_type, count in job.gpus_by_type.items():
                self.by_type[gpu_type] += count
        elif job.state == "PENDING":
            self.pending += 1
            if is_held_by_cap(job):
                self.pending_at_cap.append(job)

    def usage(
        self, lab: str, account: str, cap: int | None, overcap_by_user: Mapping[str, int]
    ) -> LabUsage:
        overcap = {user: overcap_by_user[user] for user in self.members if user in overcap_by_user}
        return LabUsage(
            lab=lab,
            account=account,
            cap=cap,
            gpus_used=sum(self.by_user.values()),
            by_user=_drop_zero(self.by_user),
            by_type=_drop_zero(self.by_type),
            overcap_by_user=_drop_zero(overcap),
            pending_at_cap=tuple(sorted(self.pending_at_cap, key=lambda j: j.job_id)),
            pending=self.pending,
        )


@dataclass(frozen=True, slots=True)
class IdleGpus:
    gpu_type: str
    node: str
    count: int
    partitions: tuple[str, ...]


def idle_gpus(nodes: Iterable[Node]) -> list[IdleGpus]:
    """Idle GPUs per type and node on schedulable nodes, most idle first."""
    idle = [
        IdleGpus(gpu_type, node.name, count, node.partitions)
        for node in nodes
        for gpu_type, count in node.gpus_idle.items()
        if count > 0
    ]
    return sorted(idle, key=lambda i: (-i.count, i.gpu_type, i.node))


def idle_by_type(idle: Iterable[IdleGpus]) -> dict[str, int]:
    """Idle GPUs per type, from `idle_gpus`'s list."""
    totals: Counter[str] = Counter()
    for item in idle:
        totals[item.gpu_type] += item.count
    return dict(sorted(totals.items()))


def _drop_zero(counts: Mapping[str, int]) -> dict[str, int]:
    return dict(sorted(((k, v) for k, v in counts.items() if v), key=lambda kv: (-kv[1], kv[0])))
