"""A job document as a whole: its record list, the messages Slurm put in it, and one record
per job id."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from core.records import Job
from core.slurm_decode import DECODE_WARNINGS
from core.slurm_json.fields import ParseResult, SlurmJsonError
from core.slurm_json.job_fields import job_label

# ESLURM_REST_EMPTY_RESULT, sacct's way of saying no job matched.
_EMPTY_RESULT = 9003


def document_list(data: object, keys: Sequence[str], what: str) -> tuple[str, list[Any]]:
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


def slurm_messages(data: dict[str, Any]) -> list[str]:
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


def parse_piece(
    data: object, what: str, parse_one: _JobParser, result: ParseResult[Job], start: int
) -> int:
    """The jobs of one document, or of one piece of it (core/slurm_stream.py), added to
    `result`, numbering its records from `start` (for their labels); the next number."""
    _, raw_jobs = document_list(data, ("jobs",), what)
    assert isinstance(data, dict)
    result.warnings.extend(slurm_messages(data))
    for index, raw in enumerate(raw_jobs, start):
        if not isinstance(raw, dict):
            result.warnings.append(f"job record #{index} skipped: not an object ({raw!r:.60})")
            continue
        label = job_label(raw, index)
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


def one_record_per_job(jobs: list[Job], warnings: list[str], what: str) -> dict[int, list[Job]]:
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
