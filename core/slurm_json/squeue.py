"""Jobs from `squeue --json`."""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterable
from typing import Any

from core.gres_shares import shared_entries, shares_by_type
from core.records import Job
from core.slurm_json.documents import one_record_per_job, parse_piece
from core.slurm_json.fields import Fields, ParseResult
from core.slurm_json.gpus import (
    gpus_from_gres_detail,
    gpus_from_spec_field,
    gpus_from_tres_field,
    scaled,
)
from core.slurm_json.job_fields import (
    UserNamer,
    array_fields,
    het_fields,
    job_comment,
    nodes_text,
    owner_name,
    reason_text,
    unowned,
)
from core.slurm_json.states import exit_info, job_state


def _squeue_requested_gpus(fields: Fields) -> dict[str, int]:
    """What a job asked for: --gpus (per job), --gpus-per-node/--gres, --gpus-per-task.

    Per-node and per-task asks are multiplied by the node and task counts. tres_req_str (the
    controller's computed total) is the fallback, and lends its GPU type when the ask was
    untyped but the totals agree.
    """
    nodes = fields.u32("node_count") or 1
    tasks = fields.u32("tasks") or 1
    asked: dict[str, int] = gpus_from_spec_field(fields, "tres_per_job")
    if not asked:
        asked = scaled(gpus_from_spec_field(fields, "tres_per_node"), nodes)
    if not asked:
        asked = scaled(gpus_from_spec_field(fields, "tres_per_task"), tasks)
    if not asked:
        per_socket = gpus_from_spec_field(fields, "tres_per_socket")
        sockets = fields.u32("sockets_per_node")
        if per_socket and sockets:
            asked = scaled(per_socket, sockets * nodes)
        elif per_socket:
            fields.warn("tres_per_socket without sockets_per_node; counting one socket per node")
            asked = scaled(per_socket, nodes)
    totals = gpus_from_tres_field(fields, "tres_req_str") or {}
    if not asked:
        return totals
    if set(asked) == {""} and totals and "" not in totals and sum(totals.values()) == asked[""]:
        return totals
    return asked


def _squeue_allocated_gpus(fields: Fields) -> dict[str, int] | None:
    """What the controller allocated; None if the record does not say.

    tres_alloc_str only lists GPUs when AccountingStorageTRES tracks gres/gpu, while
    gres_detail always does, so a tres_alloc_str without GPUs defers to gres_detail.
    """
    alloc = gpus_from_tres_field(fields, "tres_alloc_str")
    detail = gpus_from_gres_detail(fields)
    if alloc:
        return alloc
    if detail:
        return detail
    return alloc if alloc is not None else detail


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


def _squeue_shards(f: Fields, state: str) -> dict[str, int]:
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


def _job_from_squeue(
    raw: dict[str, Any], label: str, warnings: list[str], user_named: UserNamer | None = None
) -> Job | None:
    f = Fields(raw, label, warnings)
    job_id = f.u32("job_id")
    if not job_id:
        warnings.append(f"{label} skipped: missing job_id")
        return None
    state = job_state(f.get("job_state"), f, live=True)
    if state == "PENDING":
        gpus = _squeue_requested_gpus(f)
    else:
        allocated = _squeue_allocated_gpus(f)
        gpus = allocated if allocated is not None else _squeue_requested_gpus(f)
    array_job_id, array_task = array_fields(f, "array_job_id", "array_task_id", "array_task_string")
    exit_code, exit_signal = exit_info(f.get("exit_code"), state, f)
    het_job_id, het_offset = het_fields(f, "het_job_id", "het_job_offset")
    job = Job(
        job_id=job_id,
        name=f.text("name"),
        # Interned: at 100,000 jobs a few hundred users, accounts and partitions would
        # otherwise be 100,000 copies each in the poll worker's memory.
        user=sys.intern(owner_name(f.text("user_name"), f.u32("user_id"), user_named)),
        account=sys.intern(f.text("account")),
        partition=sys.intern(f.text("partition")),
        state=state,
        reason=sys.intern(reason_text(f.text("state_reason"))),
        gpus_by_type=gpus,
        nodes=nodes_text(f.text("nodes")),
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
        comment=job_comment(f),
        output_host=sys.intern(f.text("batch_host")),
        het_job_id=het_job_id,
        het_offset=het_offset,
        shards_by_type=_squeue_shards(f, state),
        qos=sys.intern(f.text("qos")),
        mail_array_tasks=array_job_id is not None and "ARRAY_TASKS" in f.strings("mail_type"),
    )
    return unowned(job, label, warnings)


def parse_squeue(data: dict[str, Any], user_named: UserNamer | None = None) -> ParseResult[Job]:
    """Jobs from `squeue --json` (any version 22.05 .. 25.x).

    Running (or otherwise started) jobs count the GPUs they were allocated; pending jobs the
    GPUs they asked for. Exit codes are filled in only for finished jobs (squeue keeps those
    until MinJobAge). A pending job array is one record with array_task like "0-9". For a
    pending job, start_time is Slurm's estimate (if it has one), not a start that happened.
    `user_named` names a job's uid where Slurm gave no user name (see `owner_name`).
    """
    return parse_squeue_pieces([data], user_named)


def parse_squeue_pieces(
    pieces: Iterable[dict[str, Any]], user_named: UserNamer | None = None
) -> ParseResult[Job]:
    """`parse_squeue` of a document read in pieces (core/slurm_stream.py): each piece a
    document holding some of the records, or the rest of the document."""
    parsed: ParseResult[Job] = ParseResult()
    numbered = 0
    parse_one = _job_from_squeue
    if user_named is not None:
        parse_one = functools.partial(_job_from_squeue, user_named=user_named)
    for piece in pieces:
        numbered = parse_piece(piece, "squeue", parse_one, parsed, numbered)
    by_id = one_record_per_job(parsed.records, parsed.warnings, "squeue")
    if len(by_id) != len(parsed.records):
        parsed.records = [runs[-1] for runs in by_id.values()]
    return parsed
