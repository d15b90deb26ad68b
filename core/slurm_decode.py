"""Decoding Slurm's JSON output into only the fields skybot reads.

`squeue --json` spends ~5 KB on each job, most of it fields skybot never looks at; at 10,000
jobs that is 50 MB of text that `json.loads` would turn into a few hundred MB of objects.
msgspec decodes into structs that name just the fields the parser uses and skips the rest in
C: about 5x faster than `json.loads` here and a fraction of the memory. The result is plain
dicts and lists, except that 23.02+'s wrapped numbers and exit codes stay small structs
(`SlurmNumber`, `SlurmExitCode`), which `core.slurm_json` reads like the dicts
`json.loads` gives.

One odd record must not blind the bot to the rest of the document (issue 13): bytes that are
not UTF-8 (a job name is whatever bytes its owner gave sbatch) are replaced with U+FFFD, a
record that is not an object is passed on as it is for the parser to skip with a warning,
and a field of an unexpected type is kept as whatever JSON value it is. What was replaced is
listed under `DECODE_WARNINGS`, naming the job or node, for the parser to report.
"""

from __future__ import annotations

from typing import Any

import msgspec
import msgspec.structs

# Every top-level job/node field core.slurm_json reads, in any Slurm version. A test checks
# that parsing the slim decode equals parsing the full document for every fixture.
JOB_FIELDS = (
    "account", "array", "array_job_id", "array_task_id", "array_task_string", "association",
    "batch_host", "comment", "current_working_directory", "end_time", "exit_code",
    "gres_detail", "het", "het_job_id", "het_job_offset", "job_id", "job_state",
    "mail_type", "name", "node_count", "nodes", "partition", "priority", "qos", "restart_cnt",
    "sockets_per_node", "standard_error", "standard_output", "start_time", "state",
    "state_reason", "stderr", "stderr_expanded", "steps", "stdout", "stdout_expanded",
    "submit_time", "tasks", "time", "time_limit", "tres",
    "tres_alloc_str", "tres_per_job", "tres_per_node", "tres_per_socket", "tres_per_task",
    "tres_req_str", "user", "user_id", "user_name", "working_directory",
)  # fmt: skip
NODE_FIELDS = (
    "alloc_cpus", "cpus", "gres", "gres_used", "hostname", "name", "node", "nodes",
    "partition", "partitions", "state", "state_flags",
)  # fmt: skip


# A value that is not a JSON object decodes as itself: one stray entry cannot fail a list.
_NotAnObject = None | bool | int | float | str | list[Any]


class SlurmNumber(msgspec.Struct, kw_only=True, gc=False):
    """23.02+'s `{"set", "infinite", "number"}`. Decoded as a struct, a fraction of a dict's
    size: a 10,000-job squeue has about 100,000 of them. Missing keys take Slurm's meaning
    of a plain set number; `number` missing means the object is not a number at all."""

    set: Any = True
    infinite: Any = False
    number: Any = msgspec.UNSET


# A numeric field in any version's spelling: plain (22.05) or wrapped (23.02+).
_Numeric = SlurmNumber | _NotAnObject | msgspec.UnsetType


class SlurmSignal(msgspec.Struct, kw_only=True, gc=False):
    id: _Numeric = msgspec.UNSET  # 23.02+
    signal_id: Any = msgspec.UNSET  # 22.05's sacct
    name: Any = msgspec.UNSET


class SlurmExitCode(msgspec.Struct, kw_only=True, gc=False):
    """An exit code in any object form: verbose (22.05's sacct, 23.02's sacct, everything
    23.11+) or a wrapped wait status (23.02's squeue: `{"set", "infinite", "number"}`);
    22.05's squeue has a plain int. One struct for both, since msgspec cannot tell two
    untagged structs apart: a wrapped number keeps its keys, so the parser reads it as the
    number it is (issue 26: it decoded as an empty struct, and exit 0 became unknown)."""

    status: Any = msgspec.UNSET
    return_code: _Numeric = msgspec.UNSET
    signal: SlurmSignal | _NotAnObject | msgspec.UnsetType = msgspec.UNSET
    set: Any = msgspec.UNSET
    infinite: Any = msgspec.UNSET
    number: Any = msgspec.UNSET


# Job fields that are numbers, and their 23.02+ wrapping; every other field is kept as decoded.
_JOB_FIELD_TYPES: dict[str, Any] = {
    **dict.fromkeys(
        ("array_job_id", "array_task_id", "end_time", "het_job_id", "het_job_offset",
         "node_count", "sockets_per_node", "start_time", "submit_time", "tasks", "time_limit",
         "user_id"),
        _Numeric,
    ),
    "exit_code": SlurmExitCode | _NotAnObject,
}  # fmt: skip


def _struct(name: str, fields: tuple[str, ...], types: dict[str, Any]) -> type[msgspec.Struct]:
    return msgspec.defstruct(
        name,
        [(f, types.get(f, Any), msgspec.UNSET) for f in fields],
        kw_only=True,
        gc=False,
    )


_Job = _struct("SlurmJob", JOB_FIELDS, _JOB_FIELD_TYPES)
_Node = _struct("SlurmNode", NODE_FIELDS, {})
_SinfoEntry = _struct("SlurmSinfoEntry", NODE_FIELDS, {})

# Key of the document under which decoding notes what it had to repair.
DECODE_WARNINGS = "skybot_decode_warnings"


class _Document(msgspec.Struct, kw_only=True, gc=False):
    jobs: list[_Job | _NotAnObject] | msgspec.UnsetType = msgspec.UNSET  # type: ignore[valid-type]
    nodes: list[_Node | _NotAnObject] | msgspec.UnsetType = msgspec.UNSET  # type: ignore[valid-type]
    sinfo: list[_SinfoEntry | _NotAnObject] | msgspec.UnsetType = msgspec.UNSET  # type: ignore[valid-type]
    # sacctmgr's: a small document, kept whole.
    associations: Any = msgspec.UNSET
    errors: Any = msgspec.UNSET
    warnings: Any = msgspec.UNSET


_decoder = msgspec.json.Decoder(_Document)


class SlurmDecodeError(ValueError):
    """The text is not JSON of the shape Slurm prints."""


def decode_slurm_json(raw: bytes | bytearray | memoryview | str) -> dict[str, Any]:
    """The document as _decode_slurm_json has it; JSON nested past the decoder's
    depth (no Slurm document is: a broken or hostile answer) is not Slurm JSON either."""
    try:
        return _decode_slurm_json(raw)
    except RecursionError:
        raise SlurmDecodeError("not Slurm JSON: nested too deeply") from None


def _decode_slurm_json(raw: bytes | bytearray | memoryview | str) -> dict[str, Any]:
    """The document as plain Python data, keeping only the fields skybot parses.

    Invalid UTF-8 is replaced rather than fatal; a document whose record lists are not
    lists is decoded in full, for the parser to judge. Only text that is not JSON raises.
    """
    repaired: list[str] = []
    try:
        document: Any = _decoder.decode(raw)
    except msgspec.DecodeError as error:
        if "UTF-8" in str(error):
            raw = _replace_invalid_utf8(raw)
            repaired.append("output was not valid UTF-8: the bad bytes were replaced")
        try:
            document = _decoder.decode(raw)
        except msgspec.DecodeError:
            # Not the shape of any Slurm version (a list where a record list should be, …):
            # decode everything and let the parser say what is wrong, or fail here if it is
            # not JSON at all.
            try:
                document = msgspec.json.decode(raw)
            except msgspec.DecodeError as plain_error:
                raise SlurmDecodeError(f"not Slurm JSON: {plain_error}") from None
    if not isinstance(document, _Document):
        if not isinstance(document, dict):
            raise SlurmDecodeError(f"not Slurm JSON: a {type(document).__name__}, not an object")
        if repaired:
            document.setdefault(DECODE_WARNINGS, []).extend(repaired)
        return document
    plain: dict[str, Any] = {}
    for key in ("jobs", "nodes", "sinfo"):
        records = getattr(document, key)
        if records is msgspec.UNSET:
            continue
        # Converted one by one, in place: each struct is freed as its dict is made, so the
        # two copies never coexist (at 10,000 jobs that is tens of MB).
        for index, record in enumerate(records):
            if isinstance(record, msgspec.Struct):
                records[index] = plain_fields(record)
        plain[key] = records
        if repaired:
            repaired.extend(_records_with_replacements(key, records))
    for key in ("associations", "errors", "warnings"):
        value = getattr(document, key)
        if value is not msgspec.UNSET:
            plain[key] = value
    if repaired:
        plain[DECODE_WARNINGS] = repaired
    return plain


def plain_fields(record: msgspec.Struct) -> dict[str, Any]:
    """The fields of a decoded struct that were present, as a dict (shallow: the values are
    kept as decoded; msgspec.to_builtins would copy every nested object again)."""
    return {
        name: value
        for name, value in zip(
            record.__struct_fields__, msgspec.structs.astuple(record), strict=True
        )
        if value is not msgspec.UNSET
    }


def _replace_invalid_utf8(raw: bytes | bytearray | memoryview | str) -> bytes:
    if isinstance(raw, str):
        return raw.encode("utf-8", errors="replace")
    return bytes(raw).decode("utf-8", errors="replace").encode("utf-8")


def _records_with_replacements(key: str, records: list[Any]) -> list[str]:
    """Which records had bytes replaced (only run on the rare document that had some)."""
    found = []
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            continue
        fields = sorted(k for k, v in record.items() if isinstance(v, str) and "\ufffd" in v)
        if fields:
            who = record.get("job_id") or record.get("name") or f"#{index}"
            kind = "job" if key == "jobs" else "node"
            found.append(f"{kind} {who}: bytes that are not UTF-8 replaced in {', '.join(fields)}")
    return found
