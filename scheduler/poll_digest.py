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

import os
import pickle
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, SupportsIndex, TypeVar, overload

import msgspec

from core.lab_usage import LabUsage, usage_of_labs
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
from core.transitions import merge_observations
from scheduler.slurm_commands import (
    SlurmCommandError,
    raise_reported_errors,
    slurm_document,
    without_reported_errors,
)
from store.snapshots import JobRow, NodeRow, SlurmChanges, job_row, node_row

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


@dataclass(slots=True)
class _Rows:
    # Each row's fingerprint (`hash` of the row: 64 bits, within one worker's life) by job
    # id and node name: an equal one means the store holds this row already.
    jobs: dict[int, int] = field(default_factory=dict)
    nodes: dict[str, int] = field(default_factory=dict)
    # For states-only polls: by the id squeue's states listing prints ("1613"; "6_1" and
    # "6_[2-5]" for an array's records), each job's state and its record as parsed.
    states: dict[str, JobState] = field(default_factory=dict)
    known: dict[str, Job] = field(default_factory=dict)


class PollDigester:
    """Turns command outputs into changes against the last committed poll."""

    def __init__(self) -> None:
        self._epoch = os.urandom(8).hex()
        self._generation: Generation = (self._epoch, 0)
        # At most two: the base the loop last committed, and the newest, maybe committed next.
        self._rows: dict[Generation, _Rows] = {}
        # The states document read by `changed_jobs`, kept for the `digest` of the same poll
        # (decoding it is a third of a steady poll's work at 100,000 jobs).
        self._states_read: tuple[Path, tuple[int, ...], dict[str, JobState]] | None = None

    def changed_jobs(self, request: ChangedJobsRequest) -> list[str]:
        """What to pass to `squeue --jobs=`: jobs new or changed, and the arrays with a task
        new or changed."""
        base = self._base(request.base)
        states = self._states(request.states)
        keys = {
            _fetch_key(key)
            for key, state in states.items()
            if base is None or base.states.get(key) != state
        }
        if base is not None:
            # An array's pending record stands for several tasks. When one starts, it is
            # listed under a job id of its own; the record's tasks changed, though none of
            # the ones still listed did.
            listed = {job.job_id for key, job in base.known.items() if key in states}
            keys.update(
                str(job.job_id)
                for key, job in base.known.items()
                if key not in states and job.job_id in listed
            )
        return sorted(keys, key=lambda key: (len(key), key))

    def _states(self, path: Path) -> dict[str, JobState]:
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
        states: dict[str, JobState] = {}
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
        changes, rows = _changes(base, live, carried, accounted, nodes.records)
        rows.states = states
        rows.known = known
        self._generation = (self._epoch, self._generation[1] + 1)
        self._rows = {self._generation: rows}
        if base is not None and request.base is not None:
            self._rows[request.base] = base
        return PollDigest(
            generation=self._generation,
            changes=changes,
            usages=_usages(live, request.limits),
            warnings=warnings,
            accounting_error=accounting_error,
            jobs=len(live),
        )

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


def _job_states(raw: bytes) -> dict[str, JobState]:
    """Each job's state in `squeue --only-job-state --json`, by the id it prints (24.11: a
    string, "1613", or "6_1" for an array's task, "6_[2-5]" for its pending rest): a job
    whose state is the same as last time is not fetched again.

    Ended jobs are left out, as squeue leaves them out of its default listing (this query
    lists them until MinJobAge); sacct reports their ends."""
    try:
        plain = _plain_states_decoder.decode(raw)
    except msgspec.DecodeError:
        pass  # not the plain shape (or not JSON): the general decoder says which
    else:
        raise_reported_errors("squeue", plain.errors)
        read = _plain_job_states(plain.jobs)
        if read is not None:
            return read
    try:
        document = _states_decoder.decode(raw)
    except msgspec.DecodeError as error:
        raise SlurmCommandError(f"squeue printed something that is not JSON: {error}") from None
    raise_reported_errors("squeue", document.errors)
    states: dict[str, JobState] = {}
    shared: dict[JobState, JobState] = {}
    for entry in document.jobs:
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
        if key in states:  # listed twice: both entries must stay the same
            state = states[key] + state
        states[key] = shared.setdefault(state, state)
    return states


def _plain_job_states(entries: list[_PlainStateEntry]) -> dict[str, JobState] | None:
    """`_job_states` for entries of the plain shape; None if a job is listed twice."""
    # Each distinct state once: the shared tuple, or None for ended.
    verdicts: dict[JobState, JobState | None] = {}
    states: dict[str, JobState] = {}
    listed = 0
    for entry in entries:
        state = entry.state
        try:
            shared = verdicts[state]
        except KeyError:
            gone = "COMPLETING" not in state and any(word in _GONE_STATES for word in state)
            shared = verdicts[state] = None if gone else state
        if shared is not None and entry.job_id:
            states[entry.job_id] = shared
            listed += 1
    return states if len(states) == listed else None


def _file_signature(path: Path) -> tuple[int, ...]:
    status = path.stat()
    return (status.st_ino, status.st_size, status.st_mtime_ns)


# Ended for good: squeue's default listing leaves these out. PREEMPTED stays: under
# PreemptMode=REQUEUE the same job runs again, and its requeue must be seen.
_GONE_STATES = FINAL_STATES - {"PREEMPTED"}


def _fetch_key(key: str) -> str:
    """What to ask `squeue --jobs=` for: the job, or for an array's key ("93108_0") the job
    id before the task (a started task's own, or the array's for its pending record)."""
    return key if key.isdigit() else key.split("_", 1)[0]


# An array's pending record standing for more tasks than this is not matched to the states
# listing's keys (it is fetched every poll instead): Slurm's MaxArraySize is 1,001 unless
# raised.
_MAX_TASKS_MATCHED = 10_000
_TASK_RANGE = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?")


def _listed_keys(job: Job) -> tuple[str, ...]:
    """The ids the states listing prints for a record, as the real 24.11 cluster prints
    them: the job's id ("1613"); for an array's record, "<record's job id>_<task>" for each
    task it stands for. A task that started has its own job id ("93108_0" for task 0 of
    array 93106); the array's pending record stands for each task still pending ("93105_0"
    to "93105_3" for "0-3"; "93107_7" and "93107_9" for "7,9%1"). A record none of whose
    keys is listed is fetched again on the next poll, as before arrays were matched."""
    if job.array_job_id is None or job.array_task is None:
        return (str(job.job_id),)
    tasks: list[int] = []
    for part in job.array_task.split("%", 1)[0].split(","):
        found = _TASK_RANGE.fullmatch(part)
        if found is None:
            return ()
        first, last, step = found.group(1), found.group(2), found.group(3)
        end = int(last) if last is not None else int(first)
        tasks.extend(range(int(first), end + 1, max(1, int(step or 1))))
        if len(tasks) > _MAX_TASKS_MATCHED:
            return ()
    return tuple(f"{job.job_id}_{task}" for task in tasks)


def _merged_live(
    base: _Rows | None, states: dict[str, JobState], fetched: Sequence[Job]
) -> tuple[list[Job], dict[str, JobState], dict[str, Job], set[int]]:
    """The jobs squeue lists now: fetched records, and the base's for jobs whose state did
    not change; the states and records of the keys whose records are known; the ids of the
    jobs carried over from the base. A job listed but neither fetched nor known keeps no
    state, so that the next poll asks for it again."""
    fetched_by_key = {key: job for job in fetched for key in _listed_keys(job)}
    base_states = base.states if base is not None else {}
    base_known = base.known if base is not None else {}
    live: dict[int, Job] = {}
    kept_states: dict[str, JobState] = {}
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


def _changes(
    base: _Rows | None,
    live: Sequence[Job],
    carried: set[int],
    accounted: Sequence[Job],
    nodes: Sequence[Node],
) -> tuple[SlurmChanges, _Rows]:
    rows = _Rows()
    changed_jobs: _Packer[JobRow] = _Packer()
    changed_ids: list[int] = []
    for job in live:
        before = base.jobs.get(job.job_id) if base is not None else None
        if before is not None and job.job_id in carried:
            fingerprint = before  # carried over from the base poll: not even encoded again
        else:
            row = job_row(job)
            fingerprint = hash(row)
            if before != fingerprint:
                changed_jobs.add(row)
                changed_ids.append(job.job_id)
        rows.jobs[job.job_id] = fingerprint
    changed_nodes: list[NodeRow] = []
    for node in nodes:
        node_entry = node_row(node)
        fingerprint = hash(node_entry)
        if base is None or base.nodes.get(node.name) != fingerprint:
            changed_nodes.append(node_entry)
        rows.nodes[node.name] = fingerprint
    observed: Iterable[Job]
    if base is None:
        observed = merge_observations(live, accounted).values()
        gone_jobs: list[int] = []
        gone_nodes: list[str] = []
    else:
        # An unchanged squeue record is what the store already holds: no transition. Only
        # the jobs that may be one are merged, not every job listed.
        maybe_new = set(changed_ids) | {job.job_id for job in accounted}
        merged = merge_observations((job for job in live if job.job_id in maybe_new), accounted)
        observed = [merged[job_id] for job_id in maybe_new if job_id in merged]
        gone_jobs = [job_id for job_id in base.jobs if job_id not in rows.jobs]
        gone_nodes = [name for name in base.nodes if name not in rows.nodes]
    changes = SlurmChanges(
        full=base is None,
        job_rows=changed_jobs.packed(),
        gone_job_ids=gone_jobs,
        node_rows=changed_nodes,
        gone_nodes=gone_nodes,
        observed=packed(observed),
    )
    return changes, rows


class Packed(Sequence[T]):
    """Items (job rows, jobs) kept pickled, a chunk of them per buffer.

    A first, full digest at 100,000 jobs has 100,000 rows and as many jobs observed: as
    objects, 60 MB in the worker and as much again in the bot. Pickled in one call, the
    pickler's memo of every object held the worker 90 MB above its peak, and unpickling
    them in one call holds the bot's interpreter for a third of a second (no Python code
    runs in between to let the event loop in). Packed, they cross the pipe as pickle
    protocol 5's out-of-band buffers (scheduler/poll_worker.py), and the store's writer
    unpacks one chunk at a time as it iterates."""

    __slots__ = ("_chunks", "_length")

    def __init__(self, chunks: Sequence[bytes | bytearray | memoryview], length: int) -> None:
        self._chunks = chunks
        self._length = length

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[T]:
        for chunk in self._chunks:
            yield from pickle.loads(chunk)

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
            return (Packed, ([bytes(chunk) for chunk in self._chunks], self._length))
        chunks = [pickle.PickleBuffer(chunk) for chunk in self._chunks]
        return (Packed, (chunks, self._length))


_ITEMS_PER_CHUNK = 2_000


class _Packer(Generic[T]):
    """Collects items into `Packed`, never holding more than a chunk of them unpacked."""

    def __init__(self) -> None:
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
        return Packed(self._chunks, self._length)

    def _pack(self) -> None:
        if self._pending:
            self._chunks.append(pickle.dumps(self._pending, protocol=pickle.HIGHEST_PROTOCOL))
            self._pending = []


def packed(items: Iterable[T]) -> Packed[T]:
    packer: _Packer[T] = _Packer()
    for item in items:
        packer.add(item)
    return packer.packed()


def _usages(live: Sequence[Job], limits: LabLimits) -> list[LabUsage]:
    # Lab usage reads only the labs' accounts' jobs and overcap's: the rest are not passed,
    # rather than looked at once per lab.
    accounts = {account for _, account in limits.labs} | {limits.overcap_account}
    usages = usage_of_labs(
        [LabName(name, account) for name, account in limits.labs],
        [job for job in live if job.account in accounts],
        limits.caps.get,
        limits.members,
        limits.overcap_account,
    )
    # The history keeps figures only: the waiting jobs need not cross the process line.
    return [replace(usage, pending_at_cap=()) for usage in usages]


@dataclass(frozen=True, slots=True)
class LabName:
    name: str
    account: str


def _no_changes() -> SlurmChanges:
    return SlurmChanges(
        full=False, job_rows=(), gone_job_ids=(), node_rows=(), gone_nodes=(), observed=()
    )
