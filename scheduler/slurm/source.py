"""Where one cluster's Slurm documents come from: the seam between the poller and a cluster.

The poller (scheduler/slurm/poller.py) decides what to read and when; a source reads it.
Job, state and node documents go into files, because the poll worker digests them from
there (at 100,000 jobs a jobs document is 600 MB and must never pass through the event
loop). Documents are Slurm's JSON as its `--json` commands print them (the data_parser
layout slurmrestd answers with too), so the digest is the same whatever the source.

Two implementations: the cluster's client commands (scheduler/slurm/cli_source.py) and its
slurmrestd (scheduler/slurm/restd_source.py, which also has `source_for`). A read that the
cluster did not answer raises SlurmCommandError (scheduler/slurm/commands.py), which fails the
poll and keeps the last snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from core.controller_diag import ControllerDiag
from core.records import LabCap
from core.slurm_limits import SlurmLimits

# (caps, members by account, warnings), as core/associations.py parses them.
Associations = tuple[list[LabCap], dict[str, set[str]], list[str]]
# The cluster's partitions, QOS and reservations, and a warning per record it could not read.
Limits = tuple[SlurmLimits, list[str]]


@dataclass(frozen=True)
class JobFetching:
    """How a states-only poll (scheduler/slurm/job_reads.py) fetches the changed jobs' records
    from this source, and what else it reads."""

    # What prints the jobs documents (their name in the digest's errors).
    command: str
    # Up to this many are fetched one id at a time (`squeue --jobs=ID`, slurmrestd's job/ID).
    by_id_max: int
    # More are fetched by lists of ids (`squeue --jobs=A,B,…`); without: one whole read.
    id_lists: bool
    # The pending jobs' settings are listed (scheduler/slurm/pending_changes.py).
    pending_listing: bool
    # The pending jobs' priorities come from the whole jobs reads (`priorities_read`).
    priorities_from_jobs: bool


class ClusterSource(Protocol):
    """One cluster's Slurm, as the poller reads it."""

    @property
    def fetching(self) -> JobFetching: ...

    @property
    def nodes_command(self) -> str:
        """What printed the nodes document (its name in the digest's errors)."""
        ...

    async def jobs_changed(self) -> bool | None:
        """Whether any job changed since this source's last jobs read, asked for almost
        nothing of slurmctld (slurmrestd's update_time); None if the source cannot ask
        that cheaply (the commands: the poller then compares states, where it reads them)."""
        ...

    async def jobs_into(self, path: Path, job_ids: str | None = None) -> bool:
        """Every job's full record (including hidden partitions'), or those of `job_ids`
        (comma-separated); False when the controller holds no such job (one id asked)."""
        ...

    async def job_states_into(self, path: Path) -> None:
        """Every job's id and state only (24.05+'s states-only read); a source that cannot
        raises SlurmCommandError, and the poller reads full records from then on."""
        ...

    async def pending_jobs_into(self, path: Path) -> None:
        """The pending jobs' settings, one line per record (scheduler/slurm/pending_changes.py)."""
        ...

    async def nodes_into(self, path: Path) -> None:
        """Every node's record."""
        ...

    def nodes_are_grouped(self) -> None:
        """The nodes document grouped nodes (23.02+'s sinfo): read them one by one now on."""
        ...

    async def ended_jobs_into(self, path: Path, start: float, end: float) -> None:
        """Accounting's records of the jobs that reached a final state (or were requeued)
        between `start` and `end` (epoch seconds), every run of a requeued job included."""
        ...

    async def controller_diag(self) -> ControllerDiag:
        """How many messages slurmctld holds for slurmdbd now, and its clock's time then;
        NOT_SAID where it did not answer."""
        ...

    async def answers_ping(self) -> bool:
        """Whether the controller answers its cheapest request now."""
        ...

    async def associations(self) -> Associations:
        """The labs' caps and members, from accounting."""
        ...

    async def limits(self) -> Limits:
        """The partitions' and QOS' limits and the reservations (core/slurm_limits.py)."""
        ...

    def priorities_read(self, priorities: Mapping[int, int]) -> None:
        """The pending jobs' priorities (job id -> priority) in the last whole jobs read, as
        the poll worker found them; only asked of a source whose `priorities_from_jobs`."""
        ...

    async def close(self) -> None:
        """Let go of what the source holds open (slurmrestd's connections)."""
        ...
