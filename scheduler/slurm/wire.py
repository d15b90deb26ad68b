"""What the poller and the poll worker say to each other: the requests and the answer.

These cross the process line pickled (scheduler/slurm/worker.py), so they hold only plain
data: paths of the commands' output files, the labs' limits, and the rows that changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from core.lab_usage import LabUsage
from core.snapshot_rows import SlurmChanges

# (this digester's random epoch, poll number): never the same for two worker processes, so
# a restarted worker cannot mistake a base it never saw for one of its own.
Generation = tuple[str, int]


@dataclass(frozen=True, slots=True)
class LabLimits:
    """What lab usage needs besides the jobs: (name, account) per lab, caps, members."""

    labs: tuple[tuple[str, str], ...]
    caps: Mapping[str, int | None]
    members: Mapping[str, frozenset[str]]
    overcap_account: str


@dataclass(frozen=True, slots=True)
class DigestRequest:
    """Files holding each command's output; `sacct` is None when sacct itself failed.

    Without `states`, `squeue` holds every job (`squeue --json`). With `states` (24.x's
    `squeue --only-job-state --json`: every job's id and state), `squeue` holds only the
    records asked for (`squeue --json --jobs=…`, see `ChangedJobsRequest`); the others are
    as in the base poll.
    """

    squeue: tuple[Path, ...]
    nodes: Path
    sacct: Path | None
    limits: LabLimits
    # The generation the store last committed, or None after a start.
    base: Generation | None
    states: Path | None = None
    # What printed `nodes` (sinfo or scontrol), for its errors.
    nodes_command: str = "sinfo"
    # What printed `squeue`'s files (squeue, or "slurmrestd jobs"), for their errors.
    jobs_command: str = "squeue"
    # `squeue` holds every job: the digest reports the pending jobs' priorities.
    priorities: bool = False


@dataclass(frozen=True, slots=True)
class ChangedJobsRequest:
    """Which jobs' full records a states-only poll must fetch: new ones and those whose
    state changed since `base` (every job without a base)."""

    states: Path
    base: Generation | None


@dataclass(frozen=True, slots=True)
class PollDigest:
    generation: Generation
    changes: SlurmChanges
    usages: list[LabUsage]
    warnings: list[str]
    # sacct's output could not be read (the command itself failing is the loop's to say).
    accounting_error: str | None = None
    # The node document was 23.02+'s grouped sinfo: nothing else was read.
    nodes_grouped: bool = False
    jobs: int = 0
    # Each pending job's priority, where the request asked for them.
    priorities: dict[int, int] | None = None
