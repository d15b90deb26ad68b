"""The heavy half of a Slurm poll: decode, parse and diff, run inside the poll worker.

At 100,000 jobs `squeue --json` is half a gigabyte; decoding and parsing it takes seconds
of CPU, which in the bot's process would hold the interpreter while slash commands wait
(issue 17). So the poller's event loop only runs the Slurm commands (their output goes to
files) and the worker process (scheduler/poll_worker.py) turns those files into what
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
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, SupportsIndex, TypeVar, overload

import msgspec

from core.het_jobs import fold_het_jobs
from core.job_output import host_names, with_host_names
from core.lab_usage import LabName, LabUsage, usage_of_labs
from core.record_codec import encode_record
from core.records import FINAL_STATES, Job, Node
from core.slurm_json import (
    ParseResult,
    SlurmJsonError,
    parse_sacct_pieces,
    parse_sinfo,
    parse_squeue_pieces,
    sinfo_is_grouped,
)
from core.slurm_stream import NotStreamable, record_slices
from core.snapshot_rows import JobRow, NodeRow, SlurmChanges, job_row, lab_usage_row, node_row
from core.transitions import merge_observations
from scheduler.slurm_commands import (
    SlurmCommandError,
    raise_reported_errors,
    slurm_document,
    without_reported_errors,
)

T = TypeVar("T")

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


# A job's state words in the states document, e.g. ("PENDING",): one shared tuple per
# distinct value, so 100,000 jobs cost 100,000 pointers.
JobState = tuple[str, ...]
# A record's state in the listing: its job's, or a fingerprint of its array tasks' (and,
# listed twice, both entries).
ListedState = JobState | int | tuple[Any, ...]


@dataclass(slots=True)
class _Rows:
    # Each row's fingerprint (`hash` of the row: 64 bits, within one worker's life) by job
    # id and node name: an equal one means the store holds this row already.
    jobs: dict[int, int] = field(default_factory=dict)
    nodes: dict[str, int] = field(default_factory=dict)
    # For states-only polls: by record id (see _states_by_record), each record's state in
    # the listing and the record as parsed.
    states: dict[str, ListedState] = field(default_factory=dict)
    known: dict[str, Job] = field(default_factory=dict)
    # By job id, the fingerprint of what the store was last told of each job sacct
    # reported (see _observed).
    accounted: dict[int, int] = field(default_factory=dict)


class PollDigester:
    """Turns command outputs into changes against the last committed poll."""

    def __init__(self) -> None:
        self._epoch = os.urandom(8).hex()
        self._generation: Generation = (self._epoch, 0)
        # At most two: the base the loop last committed, and the newest, maybe committed next.
        self._rows: dict[Generation, _Rows] = {}
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
        states = _job_states(path.read_bytes())
        self._states_read = (path, signature, states)
        return states

    def digest(self, request: DigestRequest) -> PollDigest:
        nodes_document = slurm_document(request.nodes_command, request.nodes.read_bytes())
        if sinfo_is_grouped(nodes_document):
            return PollDigest(self._generation, _no_changes(), [], [], nodes_grouped=True)
        base = self._base(request.base)
        try:
            nodes = parse_sinfo(nodes_document)
            del nodes_document
            fetched: list[Job] = []
            warnings = list(nodes.warnings)
            for path in request.squeue:
                parsed = _squeue_jobs(path)
                fetched.extend(parsed.records)
                warnings.extend(parsed.warnings)
        except SlurmJsonError as error:
            raise SlurmCommandError(str(error)) from None
        states: dict[str, ListedState] = {}
        known: dict[str, Job] = {}
        carried: set[int] = set()
        if request.states is None:
            live = fetched
        else:
            states = self._states(request.states)
            self._states_read = None
            live, states, known, carried = _merged_live(base, states, fetched)
        accounted: list[Job] = []
        accounting_error = None
        if request.sacct is not None:
            try:
                parsed_sacct = _sacct_jobs(request.sacct)
            except (SlurmCommandError, SlurmJsonError) as error:
                accounting_error = str(error)
            else:
                accounted = parsed_sacct.records
                warnings.extend(parsed_sacct.warnings)
        names = host_names(nodes.records)
        if names:
            live, accounted = with_host_names(live, names), with_host_names(accounted, names)
        folded = fold_het_jobs(live)
        if len(folded) != len(live):
            carried = _carried_het_jobs(folded, carried)
        changes, rows, usable = _changes(
            base, folded, carried, fold_het_jobs(accounted), nodes.records, warnings
        )
        # Caps count each het job component under its own account: usage before folding, of
        # the jobs the digest could use.
        kept = {job.job_id for job in usable}
        usages = _usages(
            [j for j in live if (j.job_id if j.het_job_id is None else j.het_job_id) in kept],
            request.limits,
        )
        changes = replace(
            changes,
            lab_usages=[lab_usage_row(usage, request.limits.overcap_account) for usage in usages],
        )
        rows.states = states
        rows.known = known
        self._generation = (self._epoch, self._generation[1] + 1)
        self._rows = {self._generation: rows}
        if base is not None and request.base is not None:
            self._rows[request.base] = base
        return PollDigest(
            generation=self._generation,
            changes=changes,
            # The history keeps figures only: the waiting jobs need not cross the process line.
            usages=[replace(usage, pending_at_cap=()) for usage in usages],
            warnings=self._only_new(warnings),
            accounting_error=accounting_error,
            jobs=len(usable),
        )

    def _only_new(self, warnings: list[str]) -> list[str]:
        """The warnings the last digest did not give (each once, in order)."""
        told, self._told = self._told, frozenset(warnings)
        return list(dict.fromkeys(w for w in warnings if w not in told))

    def handle(self, request: DigestRequest | ChangedJobsRequest) -> PollDigest | list[str]:
        if isinstance(request, ChangedJobsRequest):
            return self.changed_jobs(request)
        return self.digest(request)

    def _base(self, generation: Generation | None) -> _Rows | None:
        return self._rows.get(generation) if generation is not None else None


def _squeue_jobs(path: Path) -> ParseResult[Job]:
    """Every job in a `squeue --json` file, decoded a slice of records at a time: at
    100,000 jobs the file is 600 MB, which read whole held the worker near 1 GB."""
    return _jobs_in(path, "squeue", parse_squeue_pieces)


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


class _StateEntry(msgspec.Struct, gc=False):
    job_id: Any = None
    state: Any = None  # 24.11 (and job_state, in case a later one renames it)
    job_state: Any = None


class _StatesDocument(msgspec.Struct, gc=False):
    # Anything that is not an object decodes as itself and is skipped: the full record,
    # when fetched, is judged by the parser.
    jobs: list[_StateEntry | bool | int | float | str | list[Any] | None] = msgspec.field(
        default_factory=list
    )
    errors: Any = None


_states_decoder = msgspec.json.Decoder(_StatesDocument)


class _PlainStateEntry(msgspec.Struct, gc=False):
    """24.11's entry exactly: `{"job_id": "1613", "state": ["RUNNING"]}`."""

    job_id: str
    state: tuple[str, ...]


class _PlainStatesDocument(msgspec.Struct, gc=False):
    jobs: list[_PlainStateEntry]
    errors: Any = None


# At 100,000 jobs, decoding every entry into exact types is a tenth of the general
# decoder's time; any other shape falls back to it.
_plain_states_decoder = msgspec.json.Decoder(_PlainStatesDocument)


def _job_states(raw: bytes) -> dict[str, ListedState]:
    """Each record's state in `squeue --only-job-state --json`, by its job id (see
    `_states_by_record`): a record whose state is the same as last time is not fetched
    again.

    Ended jobs are left out, as squeue leaves them out of its default listing (this query
    lists them until MinJobAge); sacct reports their ends."""
    try:
        plain = _plain_states_decoder.decode(raw)
    except msgspec.DecodeError:
        pass  # not the plain shape (or not JSON): the general decoder says which
    else:
        raise_reported_errors("squeue", plain.errors)
        return _states_by_record(_plain_listed(plain.jobs))
    try:
        document = _states_decoder.decode(raw)
    except msgspec.DecodeError as error:
        raise SlurmCommandError(f"squeue printed something that is not JSON: {error}") from None
    raise_reported_errors("squeue", document.errors)
    return _states_by_record(_listed(document.jobs))


def _listed(entries: list[Any]) -> Iterator[tuple[str, JobState]]:
    """(id as printed, state) of each entry still in the queue, in any shape."""
    shared: dict[JobState, JobState] = {}
    for entry in entries:
        if not isinstance(entry, _StateEntry):
            continue
        key = entry.job_id.get("number") if isinstance(entry.job_id, dict) else entry.job_id
        if isinstance(key, int) and not isinstance(key, bool):
            key = str(key)
        if not isinstance(key, str) or not key:
            continue
        words = entry.state if entry.state is not None else entry.job_state
        words = [words] if isinstance(words, str) else words if isinstance(words, list) else []
        state = tuple(word if isinstance(word, str) else repr(word) for word in words)
        if "COMPLETING" not in state and any(word in _GONE_STATES for word in state):
            continue
        yield key, shared.setdefault(state, state)


def _plain_listed(entries: list[_PlainStateEntry]) -> Iterator[tuple[str, JobState]]:
    """`_listed` for 24.11's exact shape, judging each distinct state once."""
    verdicts: dict[JobState, JobState | None] = {}  # the shared tuple, or None for ended
    for entry in entries:
        state = entry.state
        try:
            shared = verdicts[state]
        except KeyError:
            gone = "COMPLETING" not in state and any(word in _GONE_STATES for word in state)
            shared = verdicts[state] = None if gone else state
        if shared is not None and entry.job_id:
            yield entry.job_id, shared


def _states_by_record(listed: Iterable[tuple[str, JobState]]) -> dict[str, ListedState]:
    """The listed states by the job id of the record each stands for.

    As the real 24.11 lists them: a job by its id ("1613"); an array's tasks as
    "<record's job id>_<task>". A task that started has a job id of its own ("93108_0",
    task 0 of array 93106); the array's pending record is listed once per task it stands
    for ("93105_0" to "93105_3" for "0-3"). A record's tasks are taken together, as a
    fingerprint of its (task, state) pairs, so that a task starting, leaving or changing
    state changes its record's value and the record is fetched again. An id listed twice
    keeps both entries: both must stay the same."""
    states: dict[str, ListedState] = {}
    # Per record, the sum of its (task, state) pairs' hashes: the same whatever order the
    # tasks are listed in, with no list of them kept.
    tasks: dict[str, int] = {}
    for key, state in listed:
        # A het job's component is listed as "<its own job id>+<offset>" ("2+1"), and
        # fetched, like any job, by its own id.
        key = key.partition("+")[0]
        if "_" in key:
            record, _, task = key.partition("_")
            tasks[record] = tasks.get(record, 0) + hash((task, state))
        elif key in states:
            states[key] = (states[key], state)
        else:
            states[key] = state
    for record, fingerprint in tasks.items():
        states[record] = hash((states.get(record), fingerprint))
    return states


def _file_signature(path: Path) -> tuple[int, ...]:
    status = path.stat()
    return (status.st_ino, status.st_size, status.st_mtime_ns)


# Ended for good: squeue's default listing leaves these out. PREEMPTED stays: under
# PreemptMode=REQUEUE the same job runs again, and its requeue must be seen.
_GONE_STATES = FINAL_STATES - {"PREEMPTED"}


def _merged_live(
    base: _Rows | None, states: dict[str, ListedState], fetched: Sequence[Job]
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
        elif job.state not in _GONE_STATES:
            live[job.job_id] = job  # fetched, not found by its key: asked for again next poll
    return list(live.values()), kept_states, known, carried


def _carried_het_jobs(folded: Sequence[Job], carried: set[int]) -> set[int]:
    """Which folded jobs are as in the base poll: a het job only if all its components are
    (its id is its first component's, which may be carried while another changed)."""
    carried = set(carried)
    for job in folded:
        if job.het_components and any(c.job_id not in carried for c in job.het_components):
            carried.discard(job.job_id)
    return carried


def _changes(
    base: _Rows | None,
    live: Sequence[Job],
    carried: set[int],
    accounted: Sequence[Job],
    nodes: Sequence[Node],
    warnings: list[str],
) -> tuple[SlurmChanges, _Rows, list[Job]]:
    """The poll's changes against `base`, the rows as they are now, and the live jobs that
    went into them: a record this stage cannot use is left out, named in `warnings`, and
    the rest of the poll commits (issue 26: one record failed every first digest)."""
    rows = _Rows()
    changed_jobs: _Packer[JobRow] = _Packer(JobRow)
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
    changed_nodes = _node_changes(base, nodes, rows, warnings)
    left_out: list[Job] = []
    observed: Iterable[Job]
    if base is None:
        merged = merge_observations(usable, accounted, left_out)
        reported = {job.job_id for job in accounted}
        rows.accounted = _fingerprints(merged, reported, warnings)
        # squeue's records were encoded above; sacct's, only if they could be fingerprinted.
        observed = [
            job
            for job_id, job in merged.items()
            if job_id in rows.accounted or (job_id in rows.jobs and job_id not in reported)
        ]
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


def _node_changes(
    base: _Rows | None, nodes: Sequence[Node], rows: _Rows, warnings: list[str]
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
    base: _Rows,
    live: Sequence[Job],
    changed: set[int],
    accounted: Sequence[Job],
    rows: _Rows,
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


class Packed(Sequence[T]):
    """Items (job rows, jobs) kept encoded, a chunk of them per buffer.

    A first, full digest at 100,000 jobs has 100,000 rows and as many jobs observed: as
    objects, 60 MB in the worker and as much again in the bot. Pickled in one call, the
    pickler's memo of every object held the worker 90 MB above its peak, and decoding them
    in one call holds the bot's interpreter for a third of a second (no Python code runs in
    between to let the event loop in). Packed, they cross the pipe as pickle protocol 5's
    out-of-band buffers (scheduler/poll_worker.py), and the store's writer decodes one
    chunk at a time as it iterates. Chunks are msgspec's MessagePack of the item type, not
    pickles: a pickled dataclass is rebuilt field by field in Python (`__setstate__`), and
    the 6,000 jobs a steady poll observes took 100 ms of the bot's interpreter; msgspec
    decodes them in a fifth of that."""

    __slots__ = ("_chunks", "_item_type", "_length")

    def __init__(
        self, chunks: Sequence[bytes | bytearray | memoryview], length: int, item_type: Any
    ) -> None:
        self._chunks = chunks
        self._length = length
        self._item_type = item_type

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[T]:
        decoder = _decoder(self._item_type)
        for chunk in self._chunks:
            yield from decoder.decode(chunk)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        return list(self)[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Packed):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        if int(protocol) < 5:  # copy.copy, older picklers: in band
            return (
                Packed,
                ([bytes(chunk) for chunk in self._chunks], self._length, self._item_type),
            )
        chunks = [pickle.PickleBuffer(chunk) for chunk in self._chunks]
        return (Packed, (chunks, self._length, self._item_type))


@functools.cache
def _decoder(item_type: Any) -> msgspec.msgpack.Decoder[Any]:
    return msgspec.msgpack.Decoder(list[item_type])


_ITEMS_PER_CHUNK = 2_000
_encoder = msgspec.msgpack.Encoder()


class _Packer(Generic[T]):
    """Collects items of `item_type` into `Packed`, never holding more than a chunk of
    them unpacked."""

    def __init__(self, item_type: Any) -> None:
        self._item_type = item_type
        self._length = 0
        self._chunks: list[bytes] = []
        self._pending: list[T] = []

    def add(self, item: T) -> None:
        self._length += 1
        self._pending.append(item)
        if len(self._pending) >= _ITEMS_PER_CHUNK:
            self._pack()

    def packed(self) -> Packed[T]:
        self._pack()
        return Packed(self._chunks, self._length, self._item_type)

    def _pack(self) -> None:
        if self._pending:
            self._chunks.append(_encoder.encode(self._pending))
            self._pending = []


def packed(items: Iterable[T], item_type: Any) -> Packed[T]:
    packer: _Packer[T] = _Packer(item_type)
    for item in items:
        packer.add(item)
    return packer.packed()


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
