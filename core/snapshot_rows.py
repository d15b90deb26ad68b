"""A poll's changes as rows ready for the store's tables, formatted without the store.

The poll worker (scheduler/slurm/worker.py) formats every row it sends; it imports this,
not store/, so that the child process never loads SQLite only to build tuples.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from core.lab_usage import LabUsage
from core.record_codec import encode_record, encode_usage
from core.records import Job, Node

# (job_id, user, account, partition, state, record) and (name, record), as stored.
JobRow = tuple[int, str, str, str, str, str]
NodeRow = tuple[str, str]
# (lab, account, overcap account, record): what the usage was counted for, and the count.
LabUsageRow = tuple[str, str, str, str]


@dataclass(frozen=True, slots=True)
class SlurmChanges:
    """What a poll changed, as rows ready for the tables (see scheduler/slurm/diff.py).

    `full` replaces the job and node tables with the rows given (the first poll after a
    start, or after the poll worker restarted); otherwise rows are upserted and `gone_*`
    deleted. `observed` holds only the jobs whose record may have changed (squeue's changed
    records, and what sacct reported that the store was not told already), one per job id:
    an unchanged record cannot be a transition. `lab_usages` is each lab's usage counted
    from the jobs as they are after this poll; None (the jobs written with no count) leaves
    the bot to count it.
    """

    full: bool
    job_rows: Sequence[JobRow]
    gone_job_ids: Sequence[int]
    node_rows: Sequence[NodeRow]
    gone_nodes: Sequence[str]
    observed: Collection[Job]
    lab_usages: Sequence[LabUsageRow] | None = None


def job_row(job: Job) -> JobRow:
    return (job.job_id, job.user, job.account, job.partition, job.state, encode_record(job))


def node_row(node: Node) -> NodeRow:
    return (node.name, encode_record(node))


def lab_usage_row(usage: LabUsage, overcap_account: str) -> LabUsageRow:
    return (usage.lab, usage.account, overcap_account, encode_usage(usage))
