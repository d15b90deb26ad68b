"""Jobs from `sacct --json`."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from core.efficiency import usage_from_sacct
from core.gres_shares import shards_in_tres_list
from core.records import FINAL_STATES, Job, stopped_run
from core.slurm_json.documents import one_record_per_job, parse_piece
from core.slurm_json.fields import Fields, ParseResult
from core.slurm_json.gpus import gpus_from_tres_field
from core.slurm_json.job_fields import (
    array_fields,
    het_fields,
    job_comment,
    nodes_text,
    reason_text,
    unowned,
)
from core.slurm_json.states import exit_info, job_state


def _sacct_state(f: Fields) -> str:
    state = f.get("state")
    if isinstance(state, dict):
        return job_state(state.get("current"), f)
    return job_state(state, f)  # some exporters flatten it


def _sacct_reason(f: Fields) -> str:
    if isinstance(f.get("state"), dict):
        return reason_text(f.sub("state").text("reason"))
    return ""


def _sacct_gpus(f: Fields, state: str) -> dict[str, int]:
    tres = f.sub("tres")
    requested = gpus_from_tres_field(tres, "requested") or {}
    if state == "PENDING":
        return requested
    allocated = gpus_from_tres_field(tres, "allocated")
    return allocated if allocated is not None else requested


def _sacct_shards(f: Fields, state: str) -> dict[str, int]:
    tres = f.sub("tres")
    return shards_in_tres_list(tres.get("requested" if state == "PENDING" else "allocated"))


def _sacct_user(f: Fields) -> str:
    user = f.get("user")
    if isinstance(user, str):
        return user
    return f.sub("association").text("user")


_HOST_PATTERN = re.compile(r"%\d*N")


def _sacct_output_path(f: Fields, key: str) -> str:
    """24.11+'s sacct gives the pattern ("stdout") and slurmdbd's filling of it
    ("stdout_expanded"). slurmdbd fills %N with the first node's NodeName, where slurmd
    wrote its host name (seen on 24.11: `het-1-xaea-12.out` for the real `het-1-slurm2411.out`),
    so a pattern with %N is kept for skybot to fill (core/job_output.py)."""
    pattern = f.text(key)
    if "%" in pattern and _HOST_PATTERN.search(pattern) and "\\" not in pattern:
        return pattern
    return f.text(f"{key}_expanded") or pattern


def _job_from_sacct(raw: dict[str, Any], label: str, warnings: list[str]) -> Job | None:
    f = Fields(raw, label, warnings)
    job_id = f.u32("job_id")
    if not job_id:
        warnings.append(f"{label} skipped: missing job_id")
        return None
    state = _sacct_state(f)
    array_job_id, array_task = array_fields(f.sub("array"), "job_id", "task_id", "task")
    exit_code, exit_signal = exit_info(f.get("exit_code"), state, f)
    het_job_id, het_offset = het_fields(f.sub("het"), "job_id", "job_offset")
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
        nodes=nodes_text(f.text("nodes")),
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
        comment=job_comment(f),
        usage=usage_from_sacct(raw) if state in FINAL_STATES else None,
        het_job_id=het_job_id,
        het_offset=het_offset,
        shards_by_type=_sacct_shards(f, state),
    )
    return unowned(job, label, warnings)


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
        numbered = parse_piece(piece, "sacct", _job_from_sacct, parsed, numbered)
    records = []
    for runs in one_record_per_job(parsed.records, parsed.warnings, "").values():
        job = runs[-1]
        earlier_runs = len(runs) - 1
        if earlier_runs > job.restarts:
            job = replace(job, restarts=earlier_runs)
        if earlier_runs:
            job = replace(job, earlier_run=stopped_run(runs[-2]))
        records.append(job)
    return ParseResult(records=records, warnings=parsed.warnings)
