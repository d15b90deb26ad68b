"""A whole Slurm poll saved in one call, for tests and benchmarks that need a store state.

Production saves what a poll changed (scheduler/slurm/digester.py digests squeue and sacct into
`SlurmChanges`, store/slurm_writes.py `save_slurm_changes` writes it); a test that only needs
"squeue listed these, sacct reported those" states it here, as the full replacement a first
poll makes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlite_utils

from core.het_jobs import fold_het_jobs
from core.job_output import host_names, with_host_names
from core.records import Job, Node
from core.snapshot_rows import SlurmChanges, job_row, node_row
from core.transitions import Transition, merge_observations
from store.slurm_writes import save_slurm_changes
from tests.support.factories import CLUSTER


def save_slurm_poll(
    db: sqlite_utils.Database,
    live: Sequence[Job],
    accounted: Sequence[Job],
    nodes: Sequence[Node],
    at: float,
    accounting_answered: bool = True,
    cluster: str = CLUSTER,
) -> list[Transition]:
    """Replace the job and node snapshot and record state transitions, in one transaction.

    `live` is what squeue lists now; `accounted` is what sacct reported since the last poll
    (empty, with `accounting_answered` false, when sacct failed: jobs that left squeue keep
    their last state until it answers). Returns the transitions recorded. A het job's
    components are stored as the one job they are (core/het_jobs.py), and %N's host names
    resolved (core/job_output.py), as the poll does.
    """
    names = host_names(nodes)
    live = fold_het_jobs(with_host_names(live, names))
    accounted = fold_het_jobs(with_host_names(accounted, names))
    changes = SlurmChanges(
        full=True,
        job_rows=[job_row(j) for j in live],
        gone_job_ids=(),
        node_rows=[node_row(n) for n in nodes],
        gone_nodes=(),
        observed=merge_observations(live, accounted).values(),
    )
    return save_slurm_changes(db, cluster, changes, at, accounting_answered)
