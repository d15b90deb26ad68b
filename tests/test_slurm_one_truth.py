"""One decoding truth (issue 26, item 2): the poller's slim path and the full parser give the
same records for every recorded or written document of every generation.

The poller never calls `json.loads`: it decodes squeue's and sacct's output a slice at a time
into msgspec structs that name only the fields skybot reads (core/slurm_decode.py,
core/slurm_stream.py). On 23.02's squeue (v0.0.39) an exit code is a wrapped number,
`{"set": true, "infinite": false, "number": 0}`: the slim path decoded it as an empty exit
code struct and told a COMPLETED job's exit code as unknown, while
`parse_squeue(json.loads(...))` gave 0.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.records import Job
from core.slurm_decode import decode_slurm_json
from core.slurm_json import (
    ParseResult,
    parse_sacct,
    parse_sacct_pieces,
    parse_sinfo,
    parse_squeue,
    parse_squeue_pieces,
)
from core.slurm_stream import record_slices
from scheduler.slurm.digester import _sacct_jobs, _squeue_jobs

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"


def _kind(path: Path) -> str | None:
    """What printed a fixture document: squeue, sacct or nodes (None: not a job or node list)."""
    if path.suffix != ".json":
        return None
    document = json.loads(path.read_text())
    if "jobs" in document:
        first = document["jobs"][0] if document["jobs"] else {}
        return "sacct" if isinstance(first.get("state"), dict) else "squeue"
    if "nodes" in document or "sinfo" in document:
        return "nodes"
    return None


DOCUMENTS = sorted(
    (path.relative_to(FIXTURES), kind)
    for path in FIXTURES.glob("*/*.json")
    if (kind := _kind(path)) is not None
)
JOB_DOCUMENTS = [(path, kind) for path, kind in DOCUMENTS if kind != "nodes"]
FULL: dict[str, Callable[[dict[str, Any]], ParseResult[Any]]] = {
    "squeue": parse_squeue,
    "sacct": parse_sacct,
    "nodes": parse_sinfo,
}
PIECES: dict[str, Callable[[Iterable[dict[str, Any]]], ParseResult[Job]]] = {
    "squeue": parse_squeue_pieces,
    "sacct": parse_sacct_pieces,
}


def test_every_generation_is_compared() -> None:
    generations = {path.parts[0] for path, _ in JOB_DOCUMENTS}
    assert generations >= {"v0.0.38", "v0.0.39", "v0.0.40", "v0.0.42"}
    assert {kind for _, kind in DOCUMENTS} == {"squeue", "sacct", "nodes"}


@pytest.mark.parametrize(("document", "kind"), DOCUMENTS, ids=str)
def test_the_slim_decode_parses_like_json_loads(document: Path, kind: str) -> None:
    raw = (FIXTURES / document).read_bytes()
    assert FULL[kind](decode_slurm_json(raw)).records == FULL[kind](json.loads(raw)).records


@pytest.mark.parametrize(("document", "kind"), JOB_DOCUMENTS, ids=str)
def test_the_pollers_own_reading_gives_the_full_parsers_records(document: Path, kind: str) -> None:
    """As the poll worker reads a command's output file (scheduler/slurm/digester.py)."""
    path = FIXTURES / document
    read = _squeue_jobs if kind == "squeue" else _sacct_jobs
    assert read(path).records == FULL[kind](json.loads(path.read_bytes())).records


@pytest.mark.parametrize(("document", "kind"), JOB_DOCUMENTS, ids=str)
def test_small_slices_give_the_same_records(document: Path, kind: str) -> None:
    """At 100,000 jobs a document is read in many slices; here a few records per slice."""
    raw = (FIXTURES / document).read_bytes()
    sliced = PIECES[kind](record_slices(io.BytesIO(raw).read, slice_bytes=4096))
    assert sliced.records == FULL[kind](json.loads(raw)).records


# --------------------------------------------------------------------------------------------
# Generated variants: each number and exit code a job record carries, in every spelling a
# Slurm generation uses and some no generation uses, read by both paths.

_ints = st.one_of(
    st.integers(min_value=-2, max_value=300),
    st.sampled_from([0xFFFFFFFE, 0xFFFFFFFF, 1 << 31, 1 << 40]),
)
_wrapped = st.fixed_dictionaries(
    {},
    optional={"set": st.booleans(), "infinite": st.booleans(), "number": _ints},
)
_odd = st.one_of(
    st.none(), st.text(max_size=4), st.floats(allow_nan=False, allow_infinity=False), st.just([1])
)
_number = st.one_of(_ints, _wrapped, _odd)
_signal = st.one_of(
    st.fixed_dictionaries(
        {}, optional={"id": _number, "signal_id": _number, "name": st.sampled_from(["", "KILL"])}
    ),
    _odd,
)
_status = st.one_of(
    st.sampled_from(["SUCCESS", "ERROR", "SIGNALED", "PENDING", "CORE_DUMPED", "INVALID"]),
    st.lists(st.sampled_from(["SUCCESS", "ERROR", "SIGNALED", "PENDING", "CORE_DUMPED"])),
)
_verbose_exit = st.fixed_dictionaries(
    {}, optional={"status": _status, "return_code": _number, "signal": _signal}
)
_exit_code = st.one_of(_number, _verbose_exit)
_final_states = st.sampled_from(
    ["COMPLETED", "FAILED", "OUT_OF_MEMORY", "NODE_FAIL", "RUNNING", "CANCELLED", "TIMEOUT"]
)
SQUEUE_NUMBERS = (
    "array_job_id", "array_task_id", "end_time", "node_count", "restart_cnt",
    "sockets_per_node", "start_time", "submit_time", "tasks", "time_limit",
)  # fmt: skip
_TEMPLATES = [
    (path, kind, json.loads((FIXTURES / path).read_text())) for path, kind in JOB_DOCUMENTS
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    template=st.sampled_from(_TEMPLATES),
    pick=st.integers(min_value=0),
    state=_final_states,
    exit_code=_exit_code,
    numbers=st.dictionaries(st.sampled_from(SQUEUE_NUMBERS), _number, max_size=4),
)
def test_generated_records_read_the_same_both_ways(
    template: tuple[Path, str, dict[str, Any]],
    pick: int,
    state: str,
    exit_code: Any,
    numbers: dict[str, Any],
) -> None:
    _, kind, document = template
    record = copy.deepcopy(document["jobs"][pick % len(document["jobs"])])
    record["exit_code"] = exit_code
    if kind == "squeue":
        record["job_state"] = [state]
        record.update(numbers)
    else:
        record["state"] = {"current": [state], "reason": "None"}
        record["time"] = {**record.get("time", {}), "end": numbers.get("end_time", 0)}
    raw = json.dumps({"jobs": [record]}).encode()
    slim = FULL[kind](decode_slurm_json(raw))
    full = FULL[kind](json.loads(raw))
    assert slim.records == full.records
    assert len(slim.warnings) == len(full.warnings)


def test_23_02_squeue_exit_codes_as_the_poller_reads_them() -> None:
    """23.02's squeue gives the wait status wrapped: 0 for job 108, 512 (exit 2) for 109."""
    jobs = {job.job_id: job for job in _squeue_jobs(FIXTURES / "v0.0.39" / "squeue.json").records}
    assert (jobs[108].state, jobs[108].exit_code, jobs[108].exit_signal) == ("COMPLETED", 0, None)
    assert (jobs[109].state, jobs[109].exit_code) == ("FAILED", 2)
    assert (jobs[110].state, jobs[110].exit_code) == ("CANCELLED", 0)  # ended by Slurm: 0:0
    assert jobs[101].exit_code is None  # still running
