"""The read-only picture of the cluster that every command, alert and DM answers from."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.lab_usage import LabUsage
from core.records import (
    ContainerImage,
    DirectoryUsage,
    FilesystemUsage,
    ImageDirectory,
    Job,
    LabCap,
    Node,
)
from core.slurm_limits import SlurmLimits

# "accounting" is sacct (slurmdbd), which fails apart from the controller ("slurm").
SOURCES = ("slurm", "accounting", "caps", "storage")


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """When a poller last succeeded, and what went wrong since, if anything."""

    source: str
    taken_at: float | None = None
    error: str | None = None
    error_at: float | None = None

    @property
    def failing(self) -> bool:
        return self.error is not None


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Everything skybot last saw, with the age and health of each source."""

    jobs: tuple[Job, ...] = ()
    nodes: tuple[Node, ...] = ()
    caps: tuple[LabCap, ...] = ()
    directories: tuple[DirectoryUsage, ...] = ()
    filesystems: tuple[FilesystemUsage, ...] = ()
    # Directory path -> its size (KiB) in the weekly report before the current one.
    previous_kib: dict[str, int] = field(default_factory=dict)
    # Slurm account -> users with an association in it (from sacctmgr).
    members: dict[str, frozenset[str]] = field(default_factory=dict)
    status: dict[str, SourceStatus] = field(default_factory=dict)
    version: int = 0
    # The container images the storage poller listed; image_dir is None until it first has.
    images: tuple[ContainerImage, ...] = ()
    image_dir: ImageDirectory | None = None
    # Each lab's usage as the last poll counted it, by (lab, account, overcap account):
    # the accounts it was counted for, which a view checks against its own configuration.
    lab_usages: dict[tuple[str, str, str], LabUsage] = field(default_factory=dict)
    # The partitions', QOS' limits and the reservations, as the last limits poll read them.
    limits: SlurmLimits = field(default_factory=SlurmLimits)

    def source(self, name: str) -> SourceStatus:
        return self.status.get(name, SourceStatus(name))

    def job(self, job_id: int) -> Job | None:
        return next((j for j in self.jobs if j.job_id == job_id), None)

    def cap_for(self, account: str) -> int | None:
        return next((c.gpu_cap for c in self.caps if c.account == account), None)
