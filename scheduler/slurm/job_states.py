"""Decoding 24.x's states-only listing (`squeue --only-job-state --json`) into each record's state.

A states-only poll fetches full records only for the jobs whose state changed; this says,
cheaply, which state each record is in (scheduler/slurm/digester.py compares them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from core.records import FINAL_STATES
from scheduler.slurm.commands import SlurmCommandError, raise_reported_errors

# A job's state words in the states document, e.g. ("PENDING",): one shared tuple per
# distinct value, so 100,000 jobs cost 100,000 pointers.
JobState = tuple[str, ...]
# A record's state in the listing: its job's, or a fingerprint of its array tasks' (and,
# listed twice, both entries).
ListedState = JobState | int | tuple[Any, ...]


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


def job_states(raw: bytes) -> dict[str, ListedState]:
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
        if _gone(state):
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
            shared = verdicts[state] = None if _gone(state) else state
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


# Ended for good: squeue's default listing leaves these out. PREEMPTED stays: under
# PreemptMode=REQUEUE the same job runs again, and its requeue must be seen.
GONE_STATES = FINAL_STATES - {"PREEMPTED"}
# Flags that put the job back in the queue, whatever end state they come with: squeue's
# ["NODE_FAIL", "REQUEUED"] is a job about to run again (core/slurm_json/states.py).
_REQUEUE_FLAGS = frozenset({"REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"})


def _gone(state: JobState) -> bool:
    """Whether squeue lists the job as ended for good (its end is sacct's to tell)."""
    if "COMPLETING" in state or _REQUEUE_FLAGS.intersection(state):
        return False
    return any(word in GONE_STATES for word in state)
