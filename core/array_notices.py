"""Job arrays as Slurm and its users see them: one DM when the array starts, one when its last
task ends (pure functions).

Slurm's own mail (and Slurm-Mail) sends one message when an array starts and one when it ends,
unless the job asks for each task (`--mail-type=ARRAY_TASKS`): a 10,000-task array must not
cost 10,000 DMs, nor five digests of 2,000. skybot does the same. A task's end is news only
to those who asked for each task (`/sky notify tasks on`, or ARRAY_TASKS on the job where
Slurm's record shows it, 23.02 and later); for everyone else the array's end DM counts the
tasks by how they ended, names the failed ones (as id ranges) with their exit codes, the
array's runtime and GPU-hours, and offers the first failed tasks' logs.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.blocks import section
from core.failed_jobs import failure_lines, log_buttons, state_words, task_ids
from core.job_facts import never_ran, output_path, run_seconds
from core.job_notices import JobNotice, wants
from core.notice_text import format_duration, format_job_gpus
from core.records import Job
from core.slack_text import literal

ARRAY_END = "ARRAY_END"
ARRAY_START = "ARRAY_STARTED"


def is_array_member(job: Job) -> bool:
    """Whether this record is an array's task (or its pending tasks' record)."""
    return job.array_job_id is not None


def array_end_key(cluster: str, array_job_id: int) -> str:
    return f"array:{cluster}:{array_job_id}:end"


def array_start_key(cluster: str, array_job_id: int) -> str:
    return f"arraystart:{cluster}:{array_job_id}"


def ended_tasks(records: Sequence[Job]) -> list[tuple[int, str, Job]]:
    """(task id, final state, record) of every task the records name: a task's own record,
    or the record of tasks that never started (`5-199`, cancelled while pending)."""
    tasks: dict[int, tuple[int, str, Job]] = {}
    for job in records:
        for task in task_ids(job.array_task) or [job.job_id]:
            tasks[task] = (task, job.state, job)
    return [tasks[task] for task in sorted(tasks)]


def array_is_wanted(preference: str, records: Sequence[Job]) -> bool:
    """Whether someone with this `/sky notify` preference hears of an array ending so."""
    return any(wants(preference, state) for state in {job.state for job in records})


def array_end_notice(
    array_job_id: int,
    records: Sequence[Job],
    cluster: str,
    now: float,
    buttons_cluster: str | None = None,
) -> JobNotice:
    """ "📦 Array job 1234 `sweep` ended: 200 tasks, 197 completed, 3 failed", the failed
    tasks with their exit codes, runtime and GPU-hours, and "Show log" buttons (whose values
    name `buttons_cluster`, as every job DM's buttons do). `records`: the latest final record
    of each task (`ended_tasks`)."""
    tasks = ended_tasks(records)
    counts: dict[str, int] = {}
    for _, state, _ in tasks:
        counts[state] = counts.get(state, 0) + 1
    ordered = sorted(counts.items(), key=lambda item: (item[0] != "COMPLETED", -item[1]))
    summary = ", ".join(f"{n} {state_words(state)}" for state, n in ordered)
    first = records[0]
    emoji = "✅" if set(counts) == {"COMPLETED"} else "📦"
    lines = [
        f"{emoji} Array job {array_job_id} {literal(first.name)} ended: "
        f"{len(tasks)} task{'s' if len(tasks) != 1 else ''}, {summary}.",
        " · ".join(
            [
                f"Cluster {literal(cluster)}",
                f"Partition {literal(first.partition)}",
                f"GPUs per task {format_job_gpus(first.gpus_by_type, first.shards_by_type)}"
                if first.gpus_by_type or first.shards_by_type
                else "no GPUs",
            ]
        ),
    ]
    lines.extend(failure_lines(tasks, _tasks_named))
    lines.append(_runtime_line(records, now))
    # Tasks that ran and did not complete, cancelled ones last: whose output to look at.
    failed = sorted(
        ((task, job) for task, state, job in tasks if state != "COMPLETED" and not never_ran(job)),
        key=lambda item: item[1].state == "CANCELLED",
    )
    if failed:
        task, path = failed[0][0], literal(output_path(failed[0][1]))
        lines.append(f"Output of task {task}: {path}")
    text = "\n".join(lines)
    buttons = log_buttons([(f"task {task}", job) for task, job in failed], buttons_cluster)
    return JobNotice(
        ARRAY_END, array_end_key(cluster, array_job_id), text, [section(text), *buttons]
    )


def _tasks_named(ranges: str) -> str:
    return f"task {ranges}" if ranges.isdigit() else f"tasks {ranges}"


def array_start_notice(start: JobNotice, cluster: str, array_job_id: int) -> JobNotice:
    """The start DM of an array: its first task's (core/start_notices.py), said of the array,
    keyed by the array so that its other tasks' starts are not told again."""
    text = f"📦 Array job {array_job_id}: its first task started.\n{start.text}"
    return JobNotice(
        ARRAY_START,
        array_start_key(cluster, array_job_id),
        text,
        [section(text), *start.blocks[1:]],
        start.job,
    )


def _runtime_line(records: Sequence[Job], now: float) -> str:
    """The array's span (first start to last end), its tasks' runtime in all, GPU-hours."""
    ran = [job for job in records if not never_ran(job)]
    if not ran:
        return "Runtime: no task started."
    total = 0.0
    gpu_seconds = 0.0
    for job in ran:
        seconds = run_seconds(job, now) or 0.0
        total += seconds
        gpu_seconds += seconds * job.gpus
    starts = [job.start_time for job in ran if job.start_time]
    ends = [job.end_time for job in ran if job.end_time]
    span = f"{format_duration(max(ends) - min(starts))}" if starts and ends else "unknown"
    return (
        f"Runtime: {span} from the first start to the last end; "
        f"{format_duration(total)} of task time in all · GPU-hours: {gpu_seconds / 3600:.1f}"
    )
