"""The heavy half of a Slurm poll: decode, parse and diff, run inside the poll worker.

At 100,000 jobs `squeue --json` is half a gigabyte; decoding and parsing it takes seconds
of CPU, which in the bot's process would hold the interpreter while slash commands wait
(issue 17). So the poller's event loop only runs the Slurm commands (their output goes to
files) and the worker process (scheduler/slurm/worker.py) turns those files into what
changed since the last poll the store committed: rows to upsert, ids to delete, the jobs
that may be transitions, and each lab's usage. That is small in the steady state, and it is
all the loop and the store's writer handle.

The digester keeps what it needs of the last poll it was told was committed (`base`): a
poll whose write failed is diffed again from the older base, and a worker that restarted (no
base) sends everything, which the store takes as a full replacement. It keeps only a
fingerprint of each row it sent (at 100,000 jobs the rows' JSON alone is 50 MB, which the
worker would otherwise hold twice, base and newest), and for states-only polls each job as
parsed, to stand for the jobs whose state did not change.
"""

from __future__ import annotations

import functools
import os
import pwd
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.het_jobs import fold_het_jobs
from core.job_output import host_names, with_host_names
from core.lab_usage import LabName, LabUsage, usage_of_labs
from core.priority import record_priority
from core.records import Job, Node
from core.slurm_failure import Part, failed
from core.slurm_json import (
    ParseResult,
    SlurmJsonError,
    parse_sacct_pieces,
    parse_sinfo,
    parse_squeue_pieces,
    sinfo_is_grouped,
)
from core.slurm_stream import NotStreamable, record_slices
from core.snapshot_rows import SlurmChanges, lab_usage_row
from scheduler.slurm.commands import SlurmCommandError, slurm_document, without_reported_errors
from scheduler.slurm.diff import PollRows, carried_het_jobs, changes_against, merged_live
from scheduler.slurm.job_states import ListedState, job_states
from scheduler.slurm.wire import (
    ChangedJobsRequest,
    DigestRequest,
    Generation,
    LabLimits,
    PollDigest,
)


class PollDigester:
    """Turns command outputs into changes against the last committed poll."""

    def __init__(self) -> None:
        self._epoch = os.urandom(8).hex()
        self._generation: Generation = (self._epoch, 0)
        # At most two: the base the loop last committed, and the newest, maybe committed next.
        self._rows: dict[Generation, PollRows] = {}
        # The states document read by `changed_jobs`, kept for the `digest` of the same poll
        # (decoding it is a third of a steady poll's work at 100,000 jobs).
        self._states_read: tuple[Path, tuple[int, ...], dict[str, ListedState]] | None = None
        # The last digest's warnings: sacct's window lists an odd record poll after poll
        # (five minutes by default), and it is named once, not every 15 s.
        self._told: frozenset[str] = frozenset()

    def changed_jobs(self, request: ChangedJobsRequest) -> list[str]:
        """What to pass to `squeue --jobs=`: the records new or changed (an array's pending
        record when one of its tasks is new, gone or changed)."""
        base = self._base(request.base)
        states = self._states(request.states)
        keys = [
            key for key, state in states.items() if base is None or base.states.get(key) != state
        ]
        return sorted(keys, key=lambda key: (len(key), key))

    def _states(self, path: Path) -> dict[str, ListedState]:
        signature = _file_signature(path)
        if self._states_read is not None and self._states_read[:2] == (path, signature):
            return self._states_read[2]
        states = job_states(path.read_bytes())
        self._states_read = (path, signature, states)
        return states

    def digest(self, request: DigestRequest) -> PollDigest:
        nodes_document = slurm_document(request.nodes_command, request.nodes.read_bytes())
        if sinfo_is_grouped(nodes_document):
            return PollDigest(self._generation, _no_changes(), [], [], nodes_grouped=True)
        base = self._base(request.base)
        priorities: dict[int, int] | None = {} if request.priorities else None
        nodes, fetched, warnings = _parsed(nodes_document, request, priorities)
        del nodes_document
        states: dict[str, ListedState] = {}
        known: dict[str, Job] = {}
        carried: set[int] = set()
        if request.states is None:
            live = fetched
        else:
            states = self._states(request.states)
            self._states_read = None
            live, states, known, carried = merged_live(base, states, fetched)
        accounted, accounting_error = _accounted(request.sacct, warnings)
        names = host_names(nodes)
        if names:
            live, accounted = with_host_names(live, names), with_host_names(accounted, names)
        folded = fold_het_jobs(live)
        if len(folded) != len(live):
            carried = carried_het_jobs(folded, carried)
        changes, rows, usable = changes_against(
            base, folded, carried, fold_het_jobs(accounted), nodes, warnings
        )
        usages = _usages(_unfolded(live, usable), request.limits)
        changes = replace(
            changes,
            lab_usages=[lab_usage_row(usage, request.limits.overcap_account) for usage in usages],
        )
        rows.states = states
        rows.known = known
        self._committing(rows, base, request.base)
        return PollDigest(
            generation=self._generation,
            changes=changes,
            # The history keeps figures only: the waiting jobs need not cross the process line.
            usages=[replace(usage, pending_at_cap=()) for usage in usages],
            warnings=self._only_new(warnings),
            accounting_error=accounting_error,
            jobs=len(usable),
            priorities=priorities,
        )

    def _committing(
        self, rows: PollRows, base: PollRows | None, base_at: Generation | None
    ) -> None:
        """Keep this poll's rows as the newest generation, beside the base it was diffed
        against (the store may yet fail to commit this one)."""
        self._generation = (self._epoch, self._generation[1] + 1)
        self._rows = {self._generation: rows}
        if base is not None and base_at is not None:
            self._rows[base_at] = base

    def _only_new(self, warnings: list[str]) -> list[str]:
        """The warnings the last digest did not give (each once, in order)."""
        told, self._told = self._told, frozenset(warnings)
        return list(dict.fromkeys(w for w in warnings if w not in told))

    def handle(self, request: DigestRequest | ChangedJobsRequest) -> PollDigest | list[str]:
        if isinstance(request, ChangedJobsRequest):
            return self.changed_jobs(request)
        return self.digest(request)

    def _base(self, generation: Generation | None) -> PollRows | None:
        return self._rows.get(generation) if generation is not None else None


def _parsed(
    nodes_document: dict[str, Any], request: DigestRequest, priorities: dict[int, int] | None
) -> tuple[list[Node], list[Job], list[str]]:
    """The nodes, the jobs fetched and what parsing them warned of (and, given a dict, the
    pending jobs' priorities into it); a document that is not Slurm's fails the poll as the
    command's error (slurmrestd's: its answer unreadable)."""
    try:
        nodes = parse_sinfo(nodes_document)
        fetched: list[Job] = []
        warnings = list(nodes.warnings)
        for path in request.squeue:
            parsed = _squeue_jobs(path, request.jobs_command, priorities)
            fetched.extend(parsed.records)
            warnings.extend(parsed.warnings)
    except SlurmJsonError as error:
        restd = request.jobs_command.startswith("slurmrestd")
        text = failed(Part.RESTD_GARBLED, str(error)) if restd else str(error)
        raise SlurmCommandError(text) from None
    return nodes.records, fetched, warnings


def _accounted(sacct: Path | None, warnings: list[str]) -> tuple[list[Job], str | None]:
    """sacct's jobs, or none and why its output could not be read (the command itself
    failing, `sacct` None, is the loop's to say)."""
    if sacct is None:
        return [], None
    try:
        parsed = _sacct_jobs(sacct)
    except (SlurmCommandError, SlurmJsonError) as error:
        return [], str(error)
    warnings.extend(parsed.warnings)
    return parsed.records, None


def _unfolded(live: Sequence[Job], usable: Sequence[Job]) -> list[Job]:
    """Caps count each het job component under its own account: usage before folding, of
    the jobs the digest could use."""
    kept = {job.job_id for job in usable}
    return [j for j in live if (j.job_id if j.het_job_id is None else j.het_job_id) in kept]


def _squeue_jobs(
    path: Path, command: str = "squeue", priorities: dict[int, int] | None = None
) -> ParseResult[Job]:
    """Every job in a `squeue --json` file, decoded a slice of records at a time: at
    100,000 jobs the file is 600 MB, which read whole held the worker near 1 GB. Given a
    dict, the pending jobs' priorities are put in it as the slices pass."""
    parse = functools.partial(parse_squeue_pieces, user_named=passwd_name)
    if priorities is None:
        return _jobs_in(path, command, parse)

    def noting_priorities(pieces: Iterable[dict[str, Any]]) -> ParseResult[Job]:
        return parse(_noted(pieces, priorities))

    return _jobs_in(path, command, noting_priorities)


def _noted(
    pieces: Iterable[dict[str, Any]], priorities: dict[int, int]
) -> Iterator[dict[str, Any]]:
    for piece in pieces:
        jobs = piece.get("jobs")
        for record in jobs if isinstance(jobs, list) else ():
            if (found := record_priority(record)) is not None:
                priorities[found[0]] = found[1]
        yield piece


def passwd_name(uid: int) -> str | None:
    """The system's name for `uid` (pwd, so NSS: LDAP or SSSD where the cluster uses them),
    for a squeue record whose user slurmctld could not name; None if there is none. Not
    cached: such records are rare, and a user added since is then found at once."""
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return None


def _sacct_jobs(path: Path) -> ParseResult[Job]:
    return _jobs_in(path, "sacct", parse_sacct_pieces)


def _jobs_in(
    path: Path,
    command: str,
    parse_pieces: Callable[[Iterable[dict[str, Any]]], ParseResult[Job]],
) -> ParseResult[Job]:
    """A command's jobs, read a slice at a time; a file whose layout is not recognised is
    read whole, as before, and judged as before (core/slurm_stream.py)."""
    try:
        with path.open("rb") as output:
            return parse_pieces(
                without_reported_errors(command, piece) for piece in record_slices(output.read)
            )
    except NotStreamable:
        return parse_pieces([slurm_document(command, path.read_bytes())])


def _usages(live: Sequence[Job], limits: LabLimits) -> list[LabUsage]:
    return usage_of_labs(
        [LabName(name, account) for name, account in limits.labs],
        live,
        limits.caps.get,
        limits.members,
        limits.overcap_account,
    )


def _no_changes() -> SlurmChanges:
    return SlurmChanges(
        full=False, job_rows=(), gone_job_ids=(), node_rows=(), gone_nodes=(), observed=()
    )


def _file_signature(path: Path) -> tuple[int, ...]:
    status = path.stat()
    return (status.st_ino, status.st_size, status.st_mtime_ns)
