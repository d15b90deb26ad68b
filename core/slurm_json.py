"""Parse Slurm's JSON output (`squeue --json`, `sinfo --json`, `sacct --json`) into records.

Slurm changes the JSON shape with every release, so this module reads all shapes the cluster
may produce and hides the differences from the rest of skybot:

* 22.05, OpenAPI plugin v0.0.38 (`openapi/v0.0.38` jobs.c + nodes.c, `dbv0.0.38` parse.c):
  plain numbers (null for INFINITE/NO_VAL), `job_state` a string, node `state` a lower-case
  string plus `state_flags`, sacct `exit_code: {"status": "...", "return_code": N,
  "signal": {"signal_id": N}}`, TRES as `tres_alloc_str` strings (squeue) or lists (sacct).
* 23.02+ data_parser v0.0.39 ... v0.0.42 (`src/plugins/data_parser/v0.0.4x/parsers.c`):
  numbers wrapped as `{"set": bool, "infinite": bool, "number": N}`, states as lists
  (`["PENDING", "REQUEUED"]`), exit codes as `{"status": [...], "return_code": ...,
  "signal": {"id": ..., "name": ...}}`, sinfo as `{"sinfo": [...]}` grouped by partition.

Where each field comes from is documented per version in tests/fixtures/slurm/README.md.

Input is plain JSON data: dicts, lists, str, int, float, bool and None, as `json.loads` or
`core.slurm_decode.decode_slurm_json` produce. Type checks are therefore on those concrete
classes (much cheaper than the collections.abc ones), which matters at 10,000 jobs a poll.

Robustness contract: a document of the wrong kind raises one `SlurmJsonError`; a bad record
never does. It is skipped (or partially filled) and a warning naming the record is added to
the `ParseResult`, so one odd job cannot blind the bot to the whole queue.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Generic, TypeVar

import msgspec

from core.efficiency import usage_from_sacct
from core.gres_shares import partly_used_gpus, shards_in_tres_list, shared_entries, shares_by_type
from core.records import FINAL_STATES, Job, Node, stopped_run
from core.slurm_decode import (
    DECODE_WARNINGS,
    SlurmExitCode,
    SlurmNumber,
    SlurmSignal,
    plain_fields,
)

__all__ = [
    "ParseResult",
    "SlurmJsonError",
    "parse_sacct",
    "parse_sacct_pieces",
    "parse_sinfo",
    "parse_squeue",
    "parse_squeue_pieces",
    "sinfo_is_grouped",
]

T = TypeVar("T")

# Slurm's "no value" / "infinite" sentinels for 32-bit fields; 22.05 sometimes prints them raw.
_NO_VAL32 = 0xFFFFFFFE
# ESLURM_REST_EMPTY_RESULT, sacct's way of saying no job matched.
_EMPTY_RESULT = 9003
# Counts (GPUs in a spec or TRES entry) at or above this are not real; rejecting them here
# keeps every number a record carries within SQLite's 64-bit integers, whatever sums follow.
MAX_COUNT = 1 << 31

# Job base states (JOB_STATE_BASE in slurm.h).
_BASE_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "SUSPENDED",
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
    }
)
# Flags that mean "the job still holds (or is getting) its nodes". records.py treats them as
# states of their own, and 22.05's job_state_string() prints them instead of the base state,
# so newer lists like ["COMPLETED", "COMPLETING"] are mapped the same way for consistency.
_HOLDING_FLAGS = ("COMPLETING", "CONFIGURING")
# 22.05 prints some flags *instead of* the base state (job_state_string() checks flags first).
# Each maps to the base state the job is really in.
_FLAG_ONLY_STATES = {
    "REQUEUED": "PENDING",  # old run ending, job goes back to the queue
    "REQUEUE_HOLD": "PENDING",
    "REQUEUE_FED": "PENDING",
    "SPECIAL_EXIT": "PENDING",
    "RESV_DEL_HOLD": "PENDING",
    "RECONFIG_FAIL": "PENDING",
    "RESIZING": "RUNNING",
    "SIGNALING": "RUNNING",
    "STOPPED": "RUNNING",
    "UPDATE_DB": "RUNNING",
    "STAGE_OUT": "COMPLETING",
    "POWER_UP_NODE": "CONFIGURING",
    "REVOKED": "CANCELLED",
    "LAUNCH_FAILED": "FAILED",
}

# Parsed GPU specs are cached by their text: at 10,000 jobs the same few dozen strings
# ("gres:gpu:a40:2", "cpu=4,mem=16G,node=1,billing=4,gres/gpu=2", ...) repeat thousands of
# times. Bounded so that a queue of unusual specs cannot grow it without limit.
_SPEC_CACHE_SIZE = 4096


class SlurmJsonError(ValueError):
    """The document as a whole is not Slurm JSON of the expected kind."""


@dataclass(slots=True)
class ParseResult(Generic[T]):
    """Records parsed from one document, plus a warning per record that was odd or skipped."""

    records: list[T] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class _BadField(ValueError):
    """A single field has a value of a shape no Slurm version produces."""


# --------------------------------------------------------------------------------------------
# Scalar helpers: every Slurm version's way of writing a number or a string.

_INT_TEXT = re.compile(r"\s*-?\d+\s*")


def _number(value: object) -> int | None:
    """An integer from any Slurm spelling; None for null, unset or infinite.

    Handles plain ints (22.05), `{"set", "infinite", "number"}` structs (23.02+) and digit
    strings (some 23.x string fields).
    """
    # `type(...) is int` rather than isinstance: bool is an int subclass but not a number here.
    if type(value) is int:
        return value
    if value is None:
        return None
    if type(value) is SlurmNumber:  # the slim decode's form of the dict below
        inner = value.number
        if inner is msgspec.UNSET:  # as the dict below: no "number", not a number at all
            raise _BadField(f"expected a number, got {value!r}")
        if value.infinite is True or value.set is False:
            return None
        if type(inner) is int:
            return inner
        if isinstance(inner, (dict, SlurmNumber)):
            raise _BadField(f"expected a number, got {value!r}")
        return _number(inner)
    if isinstance(value, dict) and "number" in value:
        if value.get("infinite") is True or value.get("set") is False:
            return None
        inner = value["number"]
        if type(inner) is int:
            return inner
        if isinstance(inner, dict):
            raise _BadField(f"expected a number, got {value!r}")
        return _number(inner)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INT_TEXT.fullmatch(value):
        return int(value)
    raise _BadField(f"expected a number, got {value!r}")


def _u32(value: object) -> int | None:
    """Like `_number`, but raw NO_VAL/INFINITE sentinels (22.05 leaks them) also mean None."""
    n = _number(value)
    if n is None or n < 0 or n >= _NO_VAL32:
        return None
    return n


def _string_list(value: object) -> list[str]:
    """A list of strings from a JSON list or a comma-separated string (both occur)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise _BadField(f"expected a list of strings, got {value!r}")


class _Fields:
    """Typed access to one raw record; a bad field becomes a warning and a default value.

    Methods read one key. Nested objects are read through `sub("time")`, a view whose
    warnings name the whole path ("ignoring time/start ..."). One key per call (rather than a
    path) keeps the per-field cost low: a poll reads ~25 fields of each of 10,000 jobs.
    """

    __slots__ = ("label", "prefix", "raw", "warnings")

    def __init__(
        self, raw: dict[str, Any], label: str, warnings: list[str], prefix: str = ""
    ) -> None:
        self.raw = raw
        self.label = label
        self.warnings = warnings
        self.prefix = prefix  # path of this view inside the record, for warnings

    def warn(self, message: str) -> None:
        self.warnings.append(f"{self.label}: {message}")

    def get(self, key: str) -> Any:
        return self.raw.get(key)

    def sub(self, key: str) -> _Fields:
        """The object under `key`; an empty one (every field absent) if it is not an object."""
        value = self.raw.get(key)
        return _Fields(
            value if isinstance(value, dict) else {},
            self.label,
            self.warnings,
            f"{self.prefix}{key}/",
        )

    def text(self, key: str) -> str:
        value = self.raw.get(key)
        if isinstance(value, str):
            return value
        if value is not None:
            self.warn(f"ignoring {self.prefix}{key} {value!r} (not a string)")
        return ""

    def u32(self, key: str) -> int | None:
        """Like `_u32`; plain ints (all of 22.05) skip the general `_number`."""
        value = self.raw.get(key)
        if type(value) is int:
            n: int | None = value
        else:
            try:
                n = _number(value)
            except _BadField:
                self.warn(f"ignoring {self.prefix}{key} {value!r} (not a number)")
                return None
        return n if n is not None and 0 <= n < _NO_VAL32 else None

    def timestamp(self, key: str) -> int | None:
        """Epoch seconds; Slurm writes 0 for "not yet"."""
        n = self.u32(key)
        return n if n else None

    def strings(self, key: str) -> list[str]:
        value = self.raw.get(key)
        try:
            return _string_list(value)
        except _BadField:
            self.warn(f"ignoring {self.prefix}{key} {value!r} (not a list of strings)")
            return []


# --------------------------------------------------------------------------------------------
# GPU specs: "gres:gpu:a40:2", "gres/gpu:a40=2", "gpu:a40:4(S:0)", "gpu:a40:2(IDX:0-1)", ...


class _BadGpuSpec(ValueError):
    """A GPU entry whose count or layout cannot be read."""


_TRAILING_PARENS = re.compile(r"\([^()]*\)$")


def _split_top_level(spec: str) -> list[str]:
    """Split on commas that are not inside parentheses ("gpu:a40:2(IDX:0,2),gpu:...")."""
    if "(" not in spec:
        return spec.split(",")  # the common case, and the same result
    items = []
    depth = 0
    start = 0
    for i, ch in enumerate(spec):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            items.append(spec[start:i])
            start = i + 1
    items.append(spec[start:])
    return items


def _parse_gpu_item(item: str) -> tuple[str, int] | None:
    """(type, count) for one GRES/TRES entry, or None if it is not about GPUs.

    Types are kept exactly as Slurm reports them; "(null)" (untyped GRES in gres_used) and an
    absent type both become "".
    """
    s = _TRAILING_PARENS.sub("", item.strip())
    for prefix in ("gres:", "gres/"):
        if s.startswith(prefix):
            s = s[len(prefix) :]
            break
    count_text: str | None = None
    if "=" in s:
        s, count_text = s.rsplit("=", 1)
    parts = s.split(":")
    if parts[0] != "gpu":
        return None
    rest = parts[1:]
    if count_text is None:
        if rest and rest[-1].isdigit():
            count_text = rest.pop()
        elif len(rest) <= 1:
            count_text = "1"  # "--gres=gpu" / "gres:gpu:a40" mean one GPU
        else:
            raise _BadGpuSpec(f"cannot read GPU count in {item.strip()!r}")
    if not count_text.strip().isdigit():
        raise _BadGpuSpec(f"cannot read GPU count in {item.strip()!r}")
    count = int(count_text)
    if count >= MAX_COUNT:
        raise _BadGpuSpec(f"GPU count out of range in {item.strip()!r}")
    gpu_type = ":".join(rest)
    if gpu_type in ("(null)", "null"):
        gpu_type = ""
    return gpu_type, count


@lru_cache(maxsize=_SPEC_CACHE_SIZE)
def _gpu_entries_from_spec(spec: str) -> tuple[tuple[str, int], ...]:
    """All GPU entries of a comma-separated GRES/TRES string (cached; a bad spec raises)."""
    spec = spec.strip()
    if not spec or spec in ("(null)", "N/A"):
        return ()
    entries = []
    for item in _split_top_level(spec):
        if item.strip():
            parsed = _parse_gpu_item(item)
            if parsed is not None:
                entries.append(parsed)
    return tuple(entries)


@lru_cache(maxsize=_SPEC_CACHE_SIZE)
def _combined_spec_gpus(spec: str) -> tuple[tuple[str, int], ...]:
    """`_combine_gpu_entries` of a spec, as items: a tuple, so the cached value is immutable."""
    return tuple(_combine_gpu_entries(_gpu_entries_from_spec(spec)).items())


def _gpus_from_spec(spec: str) -> dict[str, int]:
    """GPUs by type of a GRES/TRES string; a fresh dict per call, as records own theirs."""
    return dict(_combined_spec_gpus(spec))


def _gpu_entries_from_tres_list(tres: object) -> list[tuple[str, int]]:
    """GPU entries of a TRES list: [{"type": "gres", "name": "gpu:a40", "count": 2}, ...]."""
    if not isinstance(tres, list):
        raise _BadGpuSpec(f"expected a TRES list, got {tres!r}")
    entries = []
    for item in tres:
        if not isinstance(item, dict):
            raise _BadGpuSpec(f"bad TRES entry {item!r}")
        if item.get("type") != "gres":
            continue
        name = item.get("name")
        if not isinstance(name, str) or not (name == "gpu" or name.startswith("gpu:")):
            continue
        try:
            count = _number(item.get("count"))
        except _BadField as exc:
            raise _BadGpuSpec(f"bad TRES count in {item!r}") from exc
        if count is None or not 0 <= count < MAX_COUNT:
            raise _BadGpuSpec(f"bad TRES count in {item!r}")
        entries.append((name[4:], count))
    return entries


def _combine_gpu_entries(entries: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Sum entries by type; typed entries win over the untyped total.

    Slurm reports both "gres/gpu=2" and "gres/gpu:a40=2" for the same two GPUs, so the untyped
    count only adds GPUs beyond what the typed entries already account for.
    """
    typed: dict[str, int] = {}
    untyped = 0
    for gpu_type, count in entries:
        if gpu_type:
            typed[gpu_type] = typed.get(gpu_type, 0) + count
        else:
            untyped += count
    extra = untyped - sum(typed.values())
    if extra > 0:
        typed[""] = extra
    return {t: n for t, n in typed.items() if n > 0}


def _scaled(gpus: dict[str, int], factor: int) -> dict[str, int]:
    return {t: n * factor for t, n in gpus.items()}


# --------------------------------------------------------------------------------------------
# Job states and exit codes.


@lru_cache(maxsize=256)
def _known_job_state(words: tuple[str, ...]) -> str | None:
    """The state for a job's state words; None if none is a known state or flag.

    Cached: a queue has a handful of distinct state lists, each seen once per job.
    """
    upper = [w.upper() for w in words]
    for flag in _HOLDING_FLAGS:
        if flag in upper:
            return flag
    for word in upper:
        if word in _BASE_STATES:
            return word
    for word in upper:
        if word in _FLAG_ONLY_STATES:
            return _FLAG_ONLY_STATES[word]
    return None


def _job_state(value: object, fields: _Fields) -> str:
    """One state word for a job: the base state, with flags dropped.

    Exceptions, for consistency across versions: COMPLETING/CONFIGURING (resources still
    held) are reported as states, as records.ACTIVE_STATES expects, and 22.05's flag-only
    words like "REQUEUED" map to the base state the job is really in.
    """
    words: tuple[str, ...]
    if isinstance(value, str):
        words = tuple(value.split()[:1])  # "CANCELLED by 1000" is the text form; be lenient
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        words = tuple(value)
    else:
        fields.warn(f"unreadable state {value!r}")
        return "UNKNOWN"
    if not words:
        fields.warn("empty state")
        return "UNKNOWN"
    state = _known_job_state(words)
    if state is None:
        fields.warn(f"unknown state {value!r}")
        return words[0].upper()
    return state


# States in which Slurm itself ended the job. Accounting writes the job's exit code when Slurm
# ends it, before the batch step reports how the signal killed it, so `sacct -X -o ExitCode`
# shows 0:0 for these (seen on 22.05 for scancel and timeouts; 24.11's job-level exit is
# SUCCESS/0 too), while 22.05's squeue has already taken the step's SIGTERM (15).
_ENDED_BY_SLURM = frozenset({"CANCELLED", "TIMEOUT", "PREEMPTED", "DEADLINE"})


def _exit_from_wait_status(status: int | None) -> tuple[int | None, int | None]:
    """(exit code, signal) from a raw wait(2) status, as 22.05's squeue prints it.

    Read the way sacct prints ExitCode: a signalled status is "0:signal", anything else
    "code:0". A launch failure stores a Slurm error number here (4021 for an unwritable
    output file), which sacct, and therefore skybot, shows as 0:53.
    """
    if status is None or status < 0:
        return None, None
    signal = status & 0x7F
    if signal not in (0, 0x7F):
        return 0, signal
    return (status >> 8) & 0xFF, None


def _signal_number(value: object) -> int | None:
    n = _number(value)
    if n is None or n == 0:
        return None
    if not 0 < n < 128:
        raise _BadField(f"no such signal {n}")
    return n


def _exit_from_verbose(
    value: dict[str, Any], state: str, fields: _Fields
) -> tuple[int | None, int | None]:
    """(exit code, signal) from the dict forms (sacct 22.05, everything 23.02+).

    22.05's sacct (dbv0.0.38 `_dump_job_exit_code`) tests WIFEXITED before anything else, so
    every normal exit reads {"status": "SUCCESS", "return_code": 0}, even `exit 3` (seen on
    the real test cluster). That form — status a string, not a list — therefore only proves
    exit code 0 when the job COMPLETED (or Slurm ended it); otherwise the code is unknown.
    A signalled job is "0:signal", as sacct prints it.
    """
    if isinstance(value.get("signal"), SlurmSignal):
        value = {**value, "signal": plain_fields(value["signal"])}
    status = value.get("status")
    legacy = isinstance(status, str)
    statuses = {s.upper() for s in ([status] if legacy else status or []) if isinstance(s, str)}
    if statuses & {"PENDING", "INVALID"}:
        return None, None
    try:
        code = _u32(value.get("return_code"))
        signal_obj = value.get("signal")
        signal = None
        if isinstance(signal_obj, dict):
            signal = _signal_number(signal_obj.get("id", signal_obj.get("signal_id")))
    except _BadField as exc:
        fields.warn(f"unreadable exit_code {value!r} ({exc})")
        return None, None
    if signal is not None:
        return 0, signal
    if legacy and statuses == {"SUCCESS"}:
        code = 0 if state == "COMPLETED" else None
    elif code is None and "SUCCESS" in statuses:
        code = 0
    if code is not None and code > 0xFF:
        fields.warn(f"ignoring exit code {code} (out of range)")
        code = None
    return code, None


def _exit_info(value: object, state: str, fields: _Fields) -> tuple[int | None, int | None]:
    """(exit code, signal) of a finished job from any version's exit_code field, as
    `sacct -X -o ExitCode` shows it."""
    if value is None or state not in FINAL_STATES:
        return None, None
    if state in _ENDED_BY_SLURM:
        return 0, None
    if isinstance(value, SlurmExitCode):
        value = plain_fields(value)
    if isinstance(value, dict) and "number" not in value:
        return _exit_from_verbose(value, state, fields)
    try:
        return _exit_from_wait_status(_u32(value))
    except _BadField:
        fields.warn(f"unreadable exit_code {value!r}")
        return None, None


# --------------------------------------------------------------------------------------------
# Jobs: squeue and sacct.


def _job_label(raw: dict[str, Any], index: int) -> str:
    job_id = raw.get("job_id")
    try:
        n = _u32(job_id)
    except _BadField:
        n = None
    return f"job {n}" if n else f"job record #{index}"


def _gpus_from_spec_field(fields: _Fields, key: str) -> dict[str, int]:
    spec = fields.text(key)
    try:
        return _gpus_from_spec(spec)
    except _BadGpuSpec as exc:
        fields.warn(f"{fields.prefix}{key}: {exc}")
        return {}


def _gpus_from_tres_field(fields: _Fields, key: str) -> dict[str, int] | None:
    """GPUs from a TRES string or list at `key`; None when the field says nothing at all."""
    value = fields.get(key)
    if value is None or value == "" or value == []:
        return None
    try:
        if isinstance(value, str):
            return _gpus_from_spec(value)
        return _combine_gpu_entries(_gpu_entries_from_tres_list(value))
    except _BadGpuSpec as exc:
        fields.warn(f"{fields.prefix}{key}: {exc}")
        return None


def _gpus_from_gres_detail(fields: _Fields) -> dict[str, int] | None:
    detail = fields.get("gres_detail")
    if not detail:
        return None
    if not isinstance(detail, list) or not all(isinstance(d, str) for d in detail):
        fields.warn(f"ignoring gres_detail {detail!r} (not a list of strings)")
        return None
    try:
        entries = [e for per_node in detail for e in _gpu_entries_from_spec(per_node)]
    except _BadGpuSpec as exc:
        fields.warn(f"gres_detail: {exc}")
        return None
    return _combine_gpu_entries(entries)


def _squeue_requested_gpus(fields: _Fields) -> dict[str, int]:
    """What a job asked for: --gpus (per job), --gpus-per-node/--gres, --gpus-per-task.

    Per-node and per-task asks are multiplied by the node and task counts. tres_req_str (the
    controller's computed total) is the fallback, and lends its GPU type when the ask was
    untyped but the totals agree.
    """
    nodes = fields.u32("node_count") or 1
    tasks = fields.u32("tasks") or 1
    asked: dict[str, int] = _gpus_from_spec_field(fields, "tres_per_job")
    if not asked:
        asked = _scaled(_gpus_from_spec_field(fields, "tres_per_node"), nodes)
    if not asked:
        asked = _scaled(_gpus_from_spec_field(fields, "tres_per_task"), tasks)
    if not asked:
        per_socket = _gpus_from_spec_field(fields, "tres_per_socket")
        sockets = fields.u32("sockets_per_node")
        if per_socket and sockets:
            asked = _scaled(per_socket, sockets * nodes)
        elif per_socket:
            fields.warn("tres_per_socket without sockets_per_node; counting one socket per node")
            asked = _scaled(per_socket, nodes)
    totals = _gpus_from_tres_field(fields, "tres_req_str") or {}
    if not asked:
        return totals
    if set(asked) == {""} and totals and "" not in totals and sum(totals.values()) == asked[""]:
        return totals
    return asked


def _squeue_allocated_gpus(fields: _Fields) -> dict[str, int] | None:
    """What the controller allocated; None if the record does not say.

    tres_alloc_str only lists GPUs when AccountingStorageTRES tracks gres/gpu, while
    gres_detail always does, so a tres_alloc_str without GPUs defers to gres_detail.
    """
    alloc = _gpus_from_tres_field(fields, "tres_alloc_str")
    detail = _gpus_from_gres_detail(fields)
    if alloc:
        return alloc
    if detail:
        return detail
    return alloc if alloc is not None else detail


_HEX_BITMAP = re.compile(r"0[xX][0-9a-fA-F]+")


def _array_task_text(text: str) -> str:
    """Task ids as Slurm prints them ("0-9", "1,3,5-7%2").

    22.05's sacct writes a pending array's tasks as a hex bitmap ("0x3FF" = tasks 0-9, seen
    on the real test cluster); that is turned into the usual range form.
    """
    if not _HEX_BITMAP.fullmatch(text):
        return text
    bits = int(text, 16)
    ranges: list[str] = []
    task = 0
    while bits >> task:
        if not (bits >> task) & 1:
            task += 1
            continue
        first = task
        while (bits >> (task + 1)) & 1:
            task += 1
        ranges.append(str(first) if first == task else f"{first}-{task}")
        task += 1
    return ",".join(ranges)


def _array_fields(
    fields: _Fields, job_id_key: str, task_id_key: str, task_str_key: str
) -> tuple[int | None, str | None]:
    """(array_job_id, array_task) — 0/absent array_job_id means "not an array"."""
    array_job_id = fields.u32(job_id_key) or None
    if array_job_id is None:
        return None, None
    task_str = _array_task_text(fields.text(task_str_key))
    if task_str:
        return array_job_id, task_str
    task_id = fields.u32(task_id_key)
    return array_job_id, (str(task_id) if task_id is not None else None)


def _reason(text: str) -> str:
    return "" if text in ("None", "(null)") else text


def _nodes_text(text: str) -> str:
    return "" if text in ("None assigned", "(null)") else text


def _comment(fields: _Fields) -> str:
    """The job's own comment (`--comment`; skybot puts its submission tag there).

    squeue has it as a string in every version. sacct has {"administrator", "job",
    "system"}, where "job" is the job's comment — only stored by slurmdbd when slurm.conf has
    AccountingStoreFlags=job_comment, else null/"". Either shape is accepted in either place.
    """
    if isinstance(fields.get("comment"), dict):
        return fields.sub("comment").text("job")
    return fields.text("comment")


# slurmdbd's name for a job it has no name for yet (as_mysql_job_start in
# src/plugins/accounting_storage/mysql/as_mysql_job.c): its first record of a job, written
# before the controller's details arrive, has no partition either.
_FIRST_RECORD_NAME = "allocation"


def _unowned(job: Job, label: str, warnings: list[str]) -> Job | None:
    """The job, or None (named in a warning) when it lacks a user, account or partition: it
    would be counted under a user or lab "" that does not exist. sacct re-reads a first
    record complete on a later poll."""
    missing = [
        what
        for what, value in (
            ("user", job.user),
            ("account", job.account),
            ("partition", job.partition),
        )
        if not value
    ]
    if not missing:
        return job
    why = f"no {' or '.join(missing)}"
    if job.name == _FIRST_RECORD_NAME and "partition" in missing:
        why += " (slurmdbd's first record of the job; left out until it is complete)"
    warnings.append(f"{label} skipped: {why}")
    return None


def _het_fields(f: _Fields, id_key: str, offset_key: str) -> tuple[int | None, int | None]:
    """(het job id, offset) of a het job's component; (None, None) for other jobs (Slurm
    writes het job id 0 for them, and an unset offset)."""
    raw_id = f.raw.get(id_key)
    if not raw_id or (type(raw_id) is SlurmNumber and raw_id.number == 0):
        return None, None  # nearly every job: no het job (checked without a number parse)
    het_job_id = f.u32(id_key)
    if not het_job_id:
        return None, None
    offset = f.u32(offset_key)
    return het_job_id, offset if offset is not None else 0


def _shards_in(value: object, factor: int = 1) -> dict[str, int]:
    """Shards by type in a GRES/TRES string or a list of them (gres_detail), times `factor`;
    a field of another type says nothing (the GPU parse warns about it)."""
    specs = value if isinstance(value, list) else [value]
    shards = shares_by_type(
        entry for spec in specs if isinstance(spec, str) for entry in shared_entries(spec)
    )
    return {t: n * factor for t, n in shards.items()}


_SHARD_FIELDS = ("tres_per_node", "tres_req_str", "tres_alloc_str", "tres_per_job", "tres_per_task")


def _names_shards(raw: dict[str, Any]) -> bool:
    """Whether any field a job's shards are read from names one: almost no job does, and
    reading them all costs a 100,000-job poll a second (benchmarks/parse_and_store.py)."""
    for key in _SHARD_FIELDS:
        value = raw.get(key)
        if type(value) is str and "shard" in value:
            return True
    detail = raw.get("gres_detail")
    return isinstance(detail, list) and any(type(d) is str and "shard" in d for d in detail)


def _squeue_shards(f: _Fields, state: str) -> dict[str, int]:
    """GPU shards a job holds (once started) or asks for, read as its GPUs are."""
    if not _names_shards(f.raw):
        return {}
    if state != "PENDING":
        alloc = _shards_in(f.get("tres_alloc_str"))
        detail = _shards_in(f.get("gres_detail"))
        # TRES name a type only where typed TRES are tracked; gres_detail always does.
        if set(alloc) == {""} and sum(detail.values()) == alloc[""]:
            return detail
        if alloc or detail:
            return alloc or detail
    nodes, tasks = f.u32("node_count") or 1, f.u32("tasks") or 1
    return (
        _shards_in(f.get("tres_per_job"))
        or _shards_in(f.get("tres_per_node"), nodes)
        or _shards_in(f.get("tres_per_task"), tasks)
        or _shards_in(f.get("tres_req_str"))
    )


def _job_from_squeue(raw: dict[str, Any], label: str, warnings: list[str]) -> Job | None:
    f = _Fields(raw, label, warnings)
    job_id = f.u32("job_id")
    if not job_id:
        warnings.append(f"{label} skipped: missing job_id")
        return None
    state = _job_state(f.get("job_state"), f)
    if state == "PENDING":
        gpus = _squeue_requested_gpus(f)
    else:
        allocated = _squeue_allocated_gpus(f)
        gpus = allocated if allocated is not None else _squeue_requested_gpus(f)
    array_job_id, array_task = _array_fields(
        f, "array_job_id", "array_task_id", "array_task_string"
    )
    exit_code, exit_signal = _exit_info(f.get("exit_code"), state, f)
    het_job_id, het_offset = _het_fields(f, "het_job_id", "het_job_offset")
    job = Job(
        job_id=job_id,
        name=f.text("name"),
        # Interned: at 100,000 jobs a few hundred users, accounts and partitions would
        # otherwise be 100,000 copies each in the poll worker's memory.
        user=sys.intern(f.text("user_name")),
        account=sys.intern(f.text("account")),
        partition=sys.intern(f.text("partition")),
        state=state,
        reason=sys.intern(_reason(f.text("state_reason"))),
        gpus_by_type=gpus,
        nodes=_nodes_text(f.text("nodes")),
        array_job_id=array_job_id,
        array_task=array_task,
        submit_time=f.timestamp("submit_time"),
        start_time=f.timestamp("start_time"),
        end_time=f.timestamp("end_time"),
        time_limit_minutes=f.u32("time_limit"),
        restarts=f.u32("restart_cnt") or 0,
        exit_code=exit_code,
        exit_signal=exit_signal,
        std_out=f.text("standard_output"),
        work_dir=sys.intern(f.text("current_working_directory")),
        std_err=f.text("standard_error"),
        comment=_comment(f),
        output_host=sys.intern(f.text("batch_host")),
        het_job_id=het_job_id,
        het_offset=het_offset,
        shards_by_type=_squeue_shards(f, state),
    )
    return _unowned(job, label, warnings)


def _sacct_state(f: _Fields) -> str:
    state = f.get("state")
    if isinstance(state, dict):
        return _job_state(state.get("current"), f)
    return _job_state(state, f)  # some exporters flatten it


def _sacct_reason(f: _Fields) -> str:
    if isinstance(f.get("state"), dict):
        return _reason(f.sub("state").text("reason"))
    return ""


def _sacct_gpus(f: _Fields, state: str) -> dict[str, int]:
    tres = f.sub("tres")
    requested = _gpus_from_tres_field(tres, "requested") or {}
    if state == "PENDING":
        return requested
    allocated = _gpus_from_tres_field(tres, "allocated")
    return allocated if allocated is not None else requested


def _sacct_shards(f: _Fields, state: str) -> dict[str, int]:
    tres = f.sub("tres")
    return shards_in_tres_list(tres.get("requested" if state == "PENDING" else "allocated"))


def _sacct_user(f: _Fields) -> str:
    user = f.get("user")
    if isinstance(user, str):
        return user
    return f.sub("association").text("user")


_HOST_PATTERN = re.compile(r"%\d*N")


def _sacct_output_path(f: _Fields, key: str) -> str:
    """24.11+'s sacct gives the pattern ("stdout") and slurmdbd's filling of it
    ("stdout_expanded"). slurmdbd fills %N with the first node's NodeName, where slurmd
    wrote its host name (seen on 24.11: `het-1-xaea-12.out` for the real `het-1-slurm2411.out`),
    so a pattern with %N is kept for skybot to fill (core/job_output.py)."""
    pattern = f.text(key)
    if "%" in pattern and _HOST_PATTERN.search(pattern) and "\\" not in pattern:
        return pattern
    return f.text(f"{key}_expanded") or pattern


def _job_from_sacct(raw: dict[str, Any], label: str, warnings: list[str]) -> Job | None:
    f = _Fields(raw, label, warnings)
    job_id = f.u32("job_id")
    if not job_id:
        warnings.append(f"{label} skipped: missing job_id")
        return None
    state = _sacct_state(f)
    array_job_id, array_task = _array_fields(f.sub("array"), "job_id", "task_id", "task")
    exit_code, exit_signal = _exit_info(f.get("exit_code"), state, f)
    het_job_id, het_offset = _het_fields(f.sub("het"), "job_id", "job_offset")
    time = f.sub("time")
    job = Job(
        job_id=job_id,
        name=f.text("name"),
        user=_sacct_user(f),
        account=f.text("account") or f.sub("association").text("account"),
        partition=f.text("partition"),
        state=state,
        reason=_sacct_reason(f),
        gpus_by_type=_sacct_gpus(f, state),
        nodes=_nodes_text(f.text("nodes")),
        array_job_id=array_job_id,
        array_task=array_task,
        submit_time=time.timestamp("submission"),
        start_time=time.timestamp("start"),
        end_time=time.timestamp("end"),
        time_limit_minutes=time.u32("limit"),
        restarts=f.u32("restart_cnt") or 0,  # newer sacct only; see parse_sacct
        exit_code=exit_code,
        exit_signal=exit_signal,
        std_out=_sacct_output_path(f, "stdout"),
        work_dir=f.text("working_directory"),
        std_err=_sacct_output_path(f, "stderr"),
        comment=_comment(f),
        usage=usage_from_sacct(raw) if state in FINAL_STATES else None,
        het_job_id=het_job_id,
        het_offset=het_offset,
        shards_by_type=_sacct_shards(f, state),
    )
    return _unowned(job, label, warnings)


# --------------------------------------------------------------------------------------------
# Documents.


def _document_list(data: object, keys: Sequence[str], what: str) -> tuple[str, list[Any]]:
    """The record list under the first of `keys`; SlurmJsonError if there is none."""
    if not isinstance(data, dict):
        raise SlurmJsonError(f"{what}: expected a JSON object, got {type(data).__name__}")
    for key in keys:
        if key in data:
            records = data[key]
            if not isinstance(records, list):
                raise SlurmJsonError(
                    f"{what}: {key!r} should be a list, got {type(records).__name__}"
                )
            return key, records
    wanted = " or ".join(repr(k) for k in keys)
    raise SlurmJsonError(f"{what}: no {wanted} key; is this really {what} output?")


def _slurm_messages(data: dict[str, Any]) -> list[str]:
    """Errors/warnings Slurm itself put in the document, passed on as warnings."""
    messages = [str(m) for m in data.get(DECODE_WARNINGS) or ()]
    for key in ("errors", "warnings"):
        items = data.get(key)
        if not isinstance(items, list):
            continue
        for item in items:
            if _means_nothing_found(item):
                continue  # an answer ("no jobs"), not a problem
            if isinstance(item, dict):
                text = item.get("description") or item.get("error") or str(item)
            else:
                text = str(item)
            messages.append(f"slurm {key[:-1]}: {text}")
    return messages


# 24.11 says "no jobs" as a warning, not as sacct's 9003 error (seen on the real cluster with
# an empty queue or an empty sacct window).
_NOTHING_FOUND_WARNINGS = frozenset({"Zero jobs to dump"})


def _means_nothing_found(item: object) -> bool:
    if not isinstance(item, dict):
        return False
    return (
        item.get("error_number") == _EMPTY_RESULT
        or item.get("description") in _NOTHING_FOUND_WARNINGS
    )


_JobParser = Callable[[dict[str, Any], str, list[str]], Job | None]


def _parse_piece(
    data: object, what: str, parse_one: _JobParser, result: ParseResult[Job], start: int
) -> int:
    """The jobs of one document, or of one piece of it (core/slurm_stream.py), added to
    `result`, numbering its records from `start` (for their labels); the next number."""
    _, raw_jobs = _document_list(data, ("jobs",), what)
    assert isinstance(data, dict)
    result.warnings.extend(_slurm_messages(data))
    for index, raw in enumerate(raw_jobs, start):
        if not isinstance(raw, dict):
            result.warnings.append(f"job record #{index} skipped: not an object ({raw!r:.60})")
            continue
        label = _job_label(raw, index)
        try:
            job = parse_one(raw, label, result.warnings)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            result.warnings.append(f"{label} skipped: {exc}")
            continue
        if job is not None:
            result.records.append(job)
    return start + len(raw_jobs)


def _latest_run_key(job: Job) -> tuple[int, int]:
    """Orders two records of one job id: the later run (more restarts, or submitted later:
    a requeue resets the submit time) compares greater; ties keep Slurm's order."""
    return (job.restarts, job.submit_time or 0)


def _one_record_per_job(jobs: list[Job], warnings: list[str], what: str) -> dict[int, list[Job]]:
    """Records grouped by job id, in first-seen order, each group's latest run last.

    The choice depends on the records, not on the order Slurm listed them in, so the same
    output always gives the same answer (the store keeps one row per job id).
    """
    by_id: dict[int, list[Job]] = {}
    for job in jobs:
        by_id.setdefault(job.job_id, []).append(job)
    for job_id, runs in by_id.items():
        if len(runs) > 1:
            runs.sort(key=_latest_run_key)
            if what:
                warnings.append(f"job {job_id} listed {len(runs)} times by {what}; keeping one")
    return by_id


def parse_squeue(data: dict[str, Any]) -> ParseResult[Job]:
    """Jobs from `squeue --json` (any version 22.05 .. 25.x).

    Running (or otherwise started) jobs count the GPUs they were allocated; pending jobs the
    GPUs they asked for. Exit codes are filled in only for finished jobs (squeue keeps those
    until MinJobAge). A pending job array is one record with array_task like "0-9". For a
    pending job, start_time is Slurm's estimate (if it has one), not a start that happened.
    """
    return parse_squeue_pieces([data])


def parse_squeue_pieces(pieces: Iterable[dict[str, Any]]) -> ParseResult[Job]:
    """`parse_squeue` of a document read in pieces (core/slurm_stream.py): each piece a
    document holding some of the records, or the rest of the document."""
    parsed: ParseResult[Job] = ParseResult()
    numbered = 0
    for piece in pieces:
        numbered = _parse_piece(piece, "squeue", _job_from_squeue, parsed, numbered)
    by_id = _one_record_per_job(parsed.records, parsed.warnings, "squeue")
    if len(by_id) != len(parsed.records):
        parsed.records = [runs[-1] for runs in by_id.values()]
    return parsed


def parse_sacct(data: dict[str, Any]) -> ParseResult[Job]:
    """Jobs from `sacct --json` (any version 22.05 .. 25.x), one record per job.

    Steps (under each job's "steps") are ignored: the job's own entry carries its state,
    exit code and TRES. If the same job id appears more than once (`sacct --duplicates`
    lists each run of a requeued job), the latest run is kept and each earlier run counts
    as a restart, since sacct's own restart_cnt only exists in newer releases (present in
    v0.0.42, absent in v0.0.38/v0.0.40). Counting runs can only see the runs inside sacct's
    window: the store never lets a job's restart count go down.

    States are reported as sacct has them. Note that a preempted-and-requeued job that has
    not restarted yet is PREEMPTED here (the old run) while squeue lists it PENDING with
    restarts >= 1: where both are known, squeue's view of a job is the live one.
    """
    return parse_sacct_pieces([data])


def parse_sacct_pieces(pieces: Iterable[dict[str, Any]]) -> ParseResult[Job]:
    """`parse_sacct` of a document read in pieces (core/slurm_stream.py)."""
    parsed: ParseResult[Job] = ParseResult()
    numbered = 0
    for piece in pieces:
        numbered = _parse_piece(piece, "sacct", _job_from_sacct, parsed, numbered)
    records = []
    for runs in _one_record_per_job(parsed.records, parsed.warnings, "").values():
        job = runs[-1]
        earlier_runs = len(runs) - 1
        if earlier_runs > job.restarts:
            job = replace(job, restarts=earlier_runs)
        if earlier_runs:
            job = replace(job, earlier_run=stopped_run(runs[-2]))
        records.append(job)
    return ParseResult(records=records, warnings=parsed.warnings)


# --------------------------------------------------------------------------------------------
# Nodes: sinfo --json / scontrol show nodes --json.


def _node_state_text(state: object, flags: object, fields: _Fields) -> str:
    """State like MIXED or IDLE+DRAIN: 22.05 gives "idle" + state_flags, newer gives a list."""
    words: list[str]
    if isinstance(state, str):
        words = [state]
    elif isinstance(state, list) and all(isinstance(s, str) for s in state):
        words = list(state)
    else:
        fields.warn(f"unreadable state {state!r}")
        return "UNKNOWN"
    words = [w.upper() for w in words if w]
    if isinstance(flags, list):
        words += [fl.upper() for fl in flags if isinstance(fl, str) and fl.upper() not in words]
    return "+".join(words) or "UNKNOWN"


def _gpus_shared(
    gres: object, gres_used: object, gpus_total: dict[str, int], gpus_used: dict[str, int]
) -> dict[str, int]:
    if not isinstance(gres_used, str) or not isinstance(gres, str):
        return {}
    return partly_used_gpus(gres, gres_used, gpus_total, gpus_used)


def _node_from_nodes_entry(raw: dict[str, Any], label: str, warnings: list[str]) -> Node | None:
    """One node of `{"nodes": [...]}` (sinfo 22.05, scontrol show nodes --json later)."""
    f = _Fields(raw, label, warnings)
    name = f.text("name")
    if not name:
        warnings.append(f"{label} skipped: missing name")
        return None
    f.label = f"node {name}"
    gpus_total = _gpus_from_spec_field(f, "gres")
    gpus_used = _gpus_from_spec_field(f, "gres_used")
    return Node(
        name=name,
        state=_node_state_text(f.get("state"), f.get("state_flags"), f),
        partitions=tuple(f.strings("partitions")),
        gpus_total=gpus_total,
        gpus_used=gpus_used,
        gpus_shared=_gpus_shared(f.get("gres"), f.get("gres_used"), gpus_total, gpus_used),
        cpus=f.u32("cpus") or 0,
        cpus_allocated=f.u32("alloc_cpus") or 0,
        hostname=f.text("hostname"),
    )


_BRACKETS = re.compile(r"^(?P<prefix>[^\[\]]*)\[(?P<ranges>[^\[\]]+)\](?P<suffix>[^\[\]]*)$")


def _expand_hostlist(expr: str) -> list[str]:
    """Expand "node[01-03,07]" (one bracket group); anything fancier is returned as-is."""
    if "[" not in expr:
        return [expr]  # a plain name, by far the most common
    match = _BRACKETS.match(expr)
    if not match:
        return [expr]
    names = []
    for part in match["ranges"].split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return [expr]
        width = len(lo)
        for i in range(int(lo), int(hi or lo) + 1):
            names.append(f"{match['prefix']}{i:0{width}d}{match['suffix']}")
    return names


def _nodes_from_sinfo_entry(raw: dict[str, Any], label: str, warnings: list[str]) -> list[Node]:
    """Nodes of one `{"sinfo": [...]}` entry (23.02+): one partition x one group of nodes.

    sinfo groups nodes that look alike, so gres totals/used are per node; CPU counts are
    group totals and are split evenly when a group has several nodes.
    """
    f = _Fields(raw, label, warnings)
    names = [n for expr in f.sub("nodes").strings("nodes") for n in _expand_hostlist(expr)]
    if not names:
        warnings.append(f"{label} skipped: no node names")
        return []
    partition = f.get("partition")
    partition_name = (
        f.sub("partition").text("name") if isinstance(partition, dict) else f.text("partition")
    )
    state = _node_state_text(f.sub("node").get("state"), None, f)
    gres = f.sub("gres")
    gpus_total = _gpus_from_spec_field(gres, "total")
    gpus_used = _gpus_from_spec_field(gres, "used")
    gpus_shared = _gpus_shared(gres.get("total"), gres.get("used"), gpus_total, gpus_used)
    count = len(names)
    cpus_field = f.sub("cpus")
    cpus = cpus_field.u32("total") or 0
    allocated = cpus_field.u32("allocated") or 0
    if count > 1:
        cpus = cpus_field.u32("maximum") or cpus // count
        allocated = allocated // count
    return [
        Node(
            name=name,
            state=state,
            partitions=(partition_name,) if partition_name else (),
            gpus_total=dict(gpus_total),
            gpus_used=dict(gpus_used),
            gpus_shared=dict(gpus_shared),
            cpus=cpus,
            cpus_allocated=allocated,
        )
        for name in names
    ]


def _merge_node(existing: Node, extra: Node) -> Node:
    """The same node listed under several partitions: keep one record, all partitions."""
    partitions = existing.partitions + tuple(
        p for p in extra.partitions if p not in existing.partitions
    )
    return replace(existing, partitions=partitions)


def sinfo_is_grouped(data: object) -> bool:
    """Whether this is 23.02+'s grouped `sinfo --json`, whose entries carry one node's GPU
    totals for a whole group: then per-node figures must come from `scontrol show nodes`."""
    return isinstance(data, dict) and "sinfo" in data and "nodes" not in data


def parse_sinfo(data: dict[str, Any]) -> ParseResult[Node]:
    """Nodes from `sinfo --json` / `scontrol show nodes --json`, any version.

    Reads `{"nodes": [...]}` (22.05 sinfo, scontrol in all versions) and the grouped
    `{"sinfo": [...]}` of 23.02+ sinfo. A node appears once, with all its partitions.
    """
    key, raw_entries = _document_list(data, ("nodes", "sinfo"), "sinfo")
    assert isinstance(data, dict)
    result: ParseResult[Node] = ParseResult(warnings=_slurm_messages(data))
    by_name: dict[str, Node] = {}
    for index, raw in enumerate(raw_entries):
        label = f"node record #{index}"
        if not isinstance(raw, dict):
            result.warnings.append(f"{label} skipped: not an object ({raw!r:.60})")
            continue
        try:
            if key == "nodes":
                node = _node_from_nodes_entry(raw, label, result.warnings)
                nodes = [node] if node else []
            else:
                nodes = _nodes_from_sinfo_entry(raw, label, result.warnings)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            result.warnings.append(f"{label} skipped: {exc}")
            continue
        for node in nodes:
            seen = by_name.get(node.name)
            by_name[node.name] = _merge_node(seen, node) if seen else node
    result.records.extend(by_name.values())
    return result
