"""A poll's changes against the base poll: the rows that differ, the jobs that may be news.

The digester (scheduler/slurm/digester.py) keeps only a fingerprint of each row it sent;
what follows compares a poll's rows with those, and merges squeue's and sacct's records of
the jobs that may be a transition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from core.record_codec import encode_record
from core.records import Job, Node
from core.snapshot_rows import JobRow, NodeRow, SlurmChanges, job_row, node_row
from core.transitions import merge_observations
from scheduler.slurm.job_states import GONE_STATES, ListedState
from scheduler.slurm.packed import Packer, packed


@dataclass(slots=True)
class PollRows:
    """What the digester keeps of one poll, to diff the next one against."""

    # Each row's fingerprint (`hash` of the row: 64 bits, within one worker's life) by job
    # id and node name: an equal one means the store holds this row already.
    jobs: dict[int, int] = field(default_factory=dict)
    nodes: dict[str, int] = field(default_factory=dict)
    # For states-only polls: by record id (see job_states.py), each record's state in
    # the listing and the record as parsed.
    states: dict[str, ListedState] = field(default_factory=dict)
    known: dict[str, Job] = field(default_factory=dict)
    # By job id, the fingerprint of what the store was last told of each job sacct
    # reported (see _observed).
    accounted: dict[int, int] = field(default_factory=dict)


def merged_live(
    base: PollRows | None, states: dict[str, ListedState], fetched: Sequence[Job]
) -> tuple[list[Job], dict[str, ListedState], dict[str, Job], set[int]]:
    """The jobs squeue lists now: fetched records, and the base's for jobs whose state did
    not change; the states and records of the keys whose records are known; the ids of the
    jobs carried over from the base. A job listed but neither fetched nor known keeps no
    state, so that the next poll asks for it again."""
    fetched_by_key = {str(job.job_id): job for job in fetched}
    base_states = base.states if base is not None else {}
    base_known = base.known if base is not None else {}
    live: dict[int, Job] = {}
    kept_states: dict[str, ListedState] = {}
    known: dict[str, Job] = {}
    carried: set[int] = set()
    for key, state in states.items():
        job = fetched_by_key.get(key)
        if job is None:
            if base_states.get(key) != state or (job := base_known.get(key)) is None:
                continue
            carried.add(job.job_id)
        live[job.job_id] = job
        kept_states[key] = state
        known[key] = job
    for job in fetched:
        if job.job_id in live:
            live[job.job_id] = job  # a fetched record wins over the base's
            carried.discard(job.job_id)
        elif job.state not in GONE_STATES:
            live[job.job_id] = job  # fetched, not found by its key: asked for again next poll
    return list(live.values()), kept_states, known, carried


def carried_het_jobs(folded: Sequence[Job], carried: set[int]) -> set[int]:
    """Which folded jobs are as in the base poll: a het job only if all its components are
    (its id is its first component's, which may be carried while another changed)."""
    carried = set(carried)
    for job in folded:
        if job.het_components and any(c.job_id not in carried for c in job.het_components):
            carried.discard(job.job_id)
    return carried


def changes_against(
    base: PollRows | None,
    live: Sequence[Job],
    carried: set[int],
    accounted: Sequence[Job],
    nodes: Sequence[Node],
    warnings: list[str],
) -> tuple[SlurmChanges, PollRows, list[Job]]:
    """The poll's changes against `base`, the rows as they are now, and the live jobs that
    went into them: a record this stage cannot use is left out, named in `warnings`, and
    the rest of the poll commits (issue 26: one record failed every first digest)."""
    rows = PollRows()
    changed_jobs, changed_ids, usable = _job_changes(base, live, carried, rows, warnings)
    changed_nodes = _node_changes(base, nodes, rows, warnings)
    left_out: list[Job] = []
    observed: Iterable[Job]
    if base is None:
        observed = _first_observed(usable, accounted, rows, left_out, warnings)
        gone_jobs: list[int] = []
        gone_nodes: list[str] = []
    else:
        observed = _observed(base, usable, set(changed_ids), accounted, rows, left_out, warnings)
        gone_jobs = [job_id for job_id in base.jobs if job_id not in rows.jobs]
        gone_nodes = [name for name in base.nodes if name not in rows.nodes]
    warnings.extend(
        f"job {job.job_id}: sacct's record left out (no user, account or partition)"
        for job in left_out
    )
    changes = SlurmChanges(
        full=base is None,
        job_rows=changed_jobs.packed(),
        gone_job_ids=gone_jobs,
        node_rows=changed_nodes,
        gone_nodes=gone_nodes,
        observed=packed(observed, Job),
    )
    return changes, rows, usable


def _job_changes(
    base: PollRows | None,
    live: Sequence[Job],
    carried: set[int],
    rows: PollRows,
    warnings: list[str],
) -> tuple[Packer[JobRow], list[int], list[Job]]:
    """The job rows that differ from the base's (packed), their ids, and the jobs that
    could be encoded; each job's fingerprint goes into `rows`."""
    changed_jobs: Packer[JobRow] = Packer(JobRow)
    changed_ids: list[int] = []
    usable: list[Job] = []
    for job in live:
        before = base.jobs.get(job.job_id) if base is not None else None
        try:
            if before is not None and job.job_id in carried:
                fingerprint = before  # carried over from the base poll: not even encoded again
            else:
                row = job_row(job)
                fingerprint = hash(row)
                if before != fingerprint:
                    changed_jobs.add(row)
                    changed_ids.append(job.job_id)
        except Exception as error:  # one record, whatever is wrong with it
            warnings.append(_left_out(f"job {job.job_id}", error))
            continue
        rows.jobs[job.job_id] = fingerprint
        usable.append(job)
    return changed_jobs, changed_ids, usable


def _first_observed(
    usable: Sequence[Job],
    accounted: Sequence[Job],
    rows: PollRows,
    left_out: list[Job],
    warnings: list[str],
) -> list[Job]:
    """With no base, every job is news: squeue's and sacct's records merged."""
    merged = merge_observations(usable, accounted, left_out)
    reported = {job.job_id for job in accounted}
    rows.accounted = _fingerprints(merged, reported, warnings)
    # squeue's records were encoded above; sacct's, only if they could be fingerprinted.
    return [
        job
        for job_id, job in merged.items()
        if job_id in rows.accounted or (job_id in rows.jobs and job_id not in reported)
    ]


def _node_changes(
    base: PollRows | None, nodes: Sequence[Node], rows: PollRows, warnings: list[str]
) -> list[NodeRow]:
    changed: list[NodeRow] = []
    for node in nodes:
        try:
            node_entry = node_row(node)
            fingerprint = hash(node_entry)
        except Exception as error:  # one record, whatever is wrong with it
            warnings.append(_left_out(f"node {node.name}", error))
            continue
        if base is None or base.nodes.get(node.name) != fingerprint:
            changed.append(node_entry)
        rows.nodes[node.name] = fingerprint
    return changed


def _fingerprints(
    merged: Mapping[int, Job], job_ids: Iterable[int], warnings: list[str]
) -> dict[int, int]:
    """The fingerprints of these jobs' merged records; a job the merge holds no record for
    (sacct's record was left out) has none, and one that cannot be encoded is named."""
    found: dict[int, int] = {}
    for job_id in job_ids:
        job = merged.get(job_id)
        if job is None:
            continue
        try:
            found[job_id] = _fingerprint(job)
        except Exception as error:  # one record, whatever is wrong with it
            warnings.append(_left_out(f"job {job_id}", error))
    return found


def _left_out(who: str, error: Exception) -> str:
    return f"{who} left out of this poll: {type(error).__name__}: {error}"


def _observed(
    base: PollRows,
    live: Sequence[Job],
    changed: set[int],
    accounted: Sequence[Job],
    rows: PollRows,
    left_out: list[Job],
    warnings: list[str],
) -> list[Job]:
    """The jobs that may be a transition: squeue's changed records, and the jobs sacct
    reported unless the store was told exactly that of them already.

    An unchanged squeue record is what the store already holds: only the jobs that may be
    news are merged, not every job listed. sacct's window overlaps the last poll's (five
    minutes by default), so it lists the same ended jobs poll after poll: in
    benchmarks/poll_ack_latency.py's cluster, 5,000 of the 6,300 jobs observed per poll,
    each a state the store would look up and write again for nothing. What the store is
    told of such a job is the merge of its sacct records and its squeue record: an equal
    merge is an observation already made."""
    reported = {job.job_id for job in accounted}
    maybe_new = changed | reported
    merged = merge_observations(
        (job for job in live if job.job_id in maybe_new), accounted, left_out
    )
    rows.accounted = _fingerprints(merged, reported, warnings)
    observed = []
    for job_id in maybe_new:
        job = merged.get(job_id)
        if job is None:
            continue
        if job_id in reported:
            fingerprint = rows.accounted.get(job_id)
            if fingerprint is None or base.accounted.get(job_id) == fingerprint:
                continue
        observed.append(job)
    return observed


def _fingerprint(job: Job) -> int:
    return hash(encode_record(job))
