"""The heavy half of a Slurm poll: decode, parse and diff, run inside the poll worker.

At 100,000 jobs `squeue --json` is half a gigabyte; decoding and parsing it takes seconds
of CPU, which in the bot's process would hold the interpreter while slash commands wait
(issue 17). So the poller's event loop only runs the Slurm commands (their output goes to
files) and the worker process (scheduler/poll_worker.py) turns those files into what
changed since the last poll the store committed: rows to upsert, ids to delete, the jobs
that may be transitions, and each lab's usage. That is small in the steady state, and it is
all the loop and the store's writer handle.

The digester keeps the rows of the last poll it was told was committed (`base`): a poll
whose write failed is diffed again from the older base, and a worker that restarted (no
base) sends everything, which the store takes as a full replacement.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from core.lab_usage import LabUsage, lab_usage
from core.records import Job, Node
from core.slurm_json import (
    SlurmJsonError,
    parse_sacct,
    parse_sinfo,
    parse_squeue,
    sinfo_is_grouped,
)
from core.transitions import merge_observations
from scheduler.slurm_commands import SlurmCommandError, slurm_document
from store.snapshots import JobRow, NodeRow, SlurmChanges, job_row, node_row

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
    """Files holding each command's output; `sacct` is None when sacct itself failed."""

    squeue: Path
    nodes: Path
    sacct: Path | None
    limits: LabLimits
    # The generation the store last committed, or None after a start.
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


@dataclass(slots=True)
class _Rows:
    jobs: dict[int, JobRow] = field(default_factory=dict)
    nodes: dict[str, NodeRow] = field(default_factory=dict)


class PollDigester:
    """Turns command outputs into changes against the last committed poll."""

    def __init__(self) -> None:
        self._epoch = os.urandom(8).hex()
        self._generation: Generation = (self._epoch, 0)
        # At most two: the base the loop last committed, and the newest, maybe committed next.
        self._rows: dict[Generation, _Rows] = {}

    def digest(self, request: DigestRequest) -> PollDigest:
        nodes_document = slurm_document("nodes", request.nodes.read_bytes())
        if sinfo_is_grouped(nodes_document):
            return PollDigest(self._generation, _no_changes(), [], [], nodes_grouped=True)
        try:
            nodes = parse_sinfo(nodes_document)
            del nodes_document
            live = parse_squeue(slurm_document("squeue", request.squeue.read_bytes()))
        except SlurmJsonError as error:
            raise SlurmCommandError(str(error)) from None
        accounted: list[Job] = []
        accounting_error = None
        warnings = [*live.warnings, *nodes.warnings]
        if request.sacct is not None:
            try:
                parsed = parse_sacct(slurm_document("sacct", request.sacct.read_bytes()))
            except (SlurmCommandError, SlurmJsonError) as error:
                accounting_error = str(error)
            else:
                accounted = parsed.records
                warnings.extend(parsed.warnings)
        base = self._rows.get(request.base) if request.base is not None else None
        changes, rows = _changes(base, live.records, accounted, nodes.records)
        self._generation = (self._epoch, self._generation[1] + 1)
        self._rows = {self._generation: rows}
        if base is not None and request.base is not None:
            self._rows[request.base] = base
        return PollDigest(
            generation=self._generation,
            changes=changes,
            usages=_usages(live.records, request.limits),
            warnings=warnings,
            accounting_error=accounting_error,
            jobs=len(live.records),
        )


def _changes(
    base: _Rows | None, live: Sequence[Job], accounted: Sequence[Job], nodes: Sequence[Node]
) -> tuple[SlurmChanges, _Rows]:
    merged = merge_observations(live, accounted)
    rows = _Rows()
    changed_jobs: list[JobRow] = []
    for job in live:
        row = job_row(job)
        before = base.jobs.get(job.job_id) if base is not None else None
        if before == row:
            row = before  # keep one copy of an unchanged record
        else:
            changed_jobs.append(row)
        rows.jobs[job.job_id] = row
    changed_nodes: list[NodeRow] = []
    for node in nodes:
        node_entry = node_row(node)
        old = base.nodes.get(node.name) if base is not None else None
        if old == node_entry:
            node_entry = old
        else:
            changed_nodes.append(node_entry)
        rows.nodes[node.name] = node_entry
    if base is None:
        observed = merged
        gone_jobs: list[int] = []
        gone_nodes: list[str] = []
    else:
        # An unchanged squeue record is what the store already holds: no transition.
        maybe_new = {row[0] for row in changed_jobs} | {job.job_id for job in accounted}
        observed = {job_id: merged[job_id] for job_id in maybe_new if job_id in merged}
        gone_jobs = [job_id for job_id in base.jobs if job_id not in rows.jobs]
        gone_nodes = [name for name in base.nodes if name not in rows.nodes]
    changes = SlurmChanges(
        full=base is None,
        job_rows=changed_jobs,
        gone_job_ids=gone_jobs,
        node_rows=changed_nodes,
        gone_nodes=gone_nodes,
        observed=observed,
    )
    return changes, rows


def _usages(live: Sequence[Job], limits: LabLimits) -> list[LabUsage]:
    usages = []
    for name, account in limits.labs:
        usage = lab_usage(
            name,
            account,
            limits.caps.get(account),
            live,
            limits.members.get(account, ()),
            limits.overcap_account,
        )
        # The history keeps figures only: the waiting jobs need not cross the process line.
        usages.append(replace(usage, pending_at_cap=()))
    return usages


def _no_changes() -> SlurmChanges:
    return SlurmChanges(
        full=False, job_rows=(), gone_job_ids=(), node_rows=(), gone_nodes=(), observed={}
    )
