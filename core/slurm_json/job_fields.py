"""What squeue's and sacct's job records share: labels, array tasks, reasons, comments, het
job ids, and leaving out a record with no owner."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from core.records import Job
from core.slurm_decode import SlurmNumber
from core.slurm_json.fields import BadField, Fields, as_u32

# The name the system's user database (pwd) gives a uid, None if it knows none: passed in by
# whoever parses (scheduler/slurm/digester.py), so that core stays pure.
UserNamer = Callable[[int], "str | None"]


def owner_name(name: str, uid: int | None, user_named: UserNamer | None) -> str:
    """The job's user: Slurm's name for it; where Slurm left the name out but gave the uid
    (slurmctld could not look it up), the system's name for that uid, else the uid itself,
    as Slurm's own commands print it. Such a job still holds GPUs somebody must be counted
    for: it is never dropped for want of a name."""
    if name or uid is None:
        return name
    found = user_named(uid) if user_named is not None else None
    return found or str(uid)


def job_label(raw: dict[str, Any], index: int) -> str:
    job_id = raw.get("job_id")
    try:
        n = as_u32(job_id)
    except BadField:
        n = None
    return f"job {n}" if n else f"job record #{index}"


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


def array_fields(
    fields: Fields, job_id_key: str, task_id_key: str, task_str_key: str
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


def reason_text(text: str) -> str:
    return "" if text in ("None", "(null)") else text


def nodes_text(text: str) -> str:
    return "" if text in ("None assigned", "(null)") else text


def job_comment(fields: Fields) -> str:
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


def unowned(job: Job, label: str, warnings: list[str]) -> Job | None:
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


def het_fields(f: Fields, id_key: str, offset_key: str) -> tuple[int | None, int | None]:
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
