"""What Slurm's records say about a job beyond its state: how its last requeue came about,
whether sbatch refused it, the id its owner types into scontrol or scancel, how long it ran
and where its output went (pure functions). DMs, answers and buttons all read these: they are
facts of the job, not wording of any one message.
"""

from __future__ import annotations

import re
import signal

from core.job_output import stdout_path
from core.records import Job
from core.slack_text import literal
from core.transitions import Transition


def requeue_cause(job: Job) -> str | None:
    """How the job's last requeue came about, when sacct still lists the run it stopped:
    PREEMPTED, NODE_FAIL or REQUEUED (`scontrol requeue`); None when skybot cannot tell."""
    return job.earlier_run.state if job.restarts and job.earlier_run is not None else None


def refused_at_submission(transition: Transition) -> bool:
    """sbatch refused the job, yet slurmdbd keeps a record of it: FAILED, `1:0` in `sacct -X`,
    never on a node, ended the second it was submitted, never seen by squeue (22.05 gives it
    start = end = submit, 24.11 no start). Its user already has sbatch's reason; a "failed
    with exit code …" DM on top of it would be wrong."""
    job = transition.job
    ended = job.end_time
    return (
        transition.from_state is None
        and job.state == "FAILED"
        and not job.restarts
        and job.nodes in ("", "None assigned")
        and ended is not None
        and ended == job.submit_time
        and (not job.start_time or job.start_time >= ended)
    )


# What Slurm's commands take inside `123_[...]`: task ids and ranges. squeue writes a pending
# record's tasks expanded ("1,3,5,7,9%2"), and scancel refuses a step ("5-9:2").
_TASK_LIST = re.compile(r"[0-9]{1,9}(?:-[0-9]{1,9})?(?:,[0-9]{1,9}(?:-[0-9]{1,9})?){0,999}")


def slurm_job_id(job: Job, task: str | None = None) -> str:
    """The id to give scontrol and scancel for this record, in a form Slurm accepts: `123_4`
    for one array task (`task` when the question named one), `123_[0-99]` for the tasks a
    pending array record stands for (Slurm answers "Invalid job id specified" to the `%10`
    throttle squeue prints after them), `123` otherwise."""
    array_id = job.array_job_id
    if array_id is None or not job.array_task:
        return str(job.job_id)
    if task is not None:
        return f"{array_id}_{task}"
    if job.array_task.isdigit():
        return f"{array_id}_{job.array_task}"
    tasks = job.array_task.strip("[]").split("%")[0]
    return f"{array_id}_[{tasks}]" if _TASK_LIST.fullmatch(tasks) else str(array_id)


def requeue_words(job: Job) -> str:
    """ "was requeued …" naming who did it, as far as Slurm's records say."""
    cause = requeue_cause(job)
    if cause == "NODE_FAIL":
        return "was requeued after its node failed"
    if cause == "REQUEUED":
        return "was requeued with `scontrol requeue` (by an admin, or by its owner)"
    if cause == "PREEMPTED":
        return "was preempted and requeued"
    return "was requeued"


def stopped_run_seconds(job: Job) -> float | None:
    """How long the run a requeue stopped had lasted, by Slurm's own start and end of it,
    where sacct lists that run; None where it does not."""
    earlier = job.earlier_run
    if earlier is not None and earlier.start_time and earlier.end_time:
        return float(max(0, earlier.end_time - earlier.start_time))
    return None


def job_label(job: Job) -> str:
    """The id users type into scancel: `123_4` for array tasks, `123` otherwise (raw text)."""
    if job.array_job_id is not None and job.array_task:
        return f"{job.array_job_id}_{job.array_task}"
    return str(job.job_id)


def shown_label(job: Job) -> str:
    """The label for a message: a plain number as it is, an array task's (Slurm's text) literal."""
    label = job_label(job)
    return label if label.isdigit() else literal(label)


def run_seconds(
    job: Job, now: float, started: float | None = None, ended: float | None = None
) -> float | None:
    """How long the (last) run lasted: end - start, or now - start if Slurm has no end yet.

    `started` and `ended` override the job's own times (a requeued job's are its next
    run's). A pending job's start time may be Slurm's forecast, so a start in the future
    means "unknown", and an end after `now` (a forecast too) is replaced by `now`.
    """
    start = started if started is not None else job.start_time
    if not start or start > now:
        return None
    end = ended if ended is not None else job.end_time
    if not end or not start <= end <= now:
        end = now
    return float(end - start)


def never_ran(job: Job) -> bool:
    """Whether the job ended without ever running. Slurm gives a job cancelled while pending
    a start time equal to its end time (and no nodes), which would read as "Runtime: 0 s"."""
    if job.restarts:
        return False
    if not job.start_time:
        return True
    return job.start_time == job.end_time and job.nodes in ("", "None assigned")


def output_path(job: Job) -> str:
    """Where stdout went: Slurm's filename pattern filled in, or its default in the work dir."""
    return stdout_path(job)


def exit_words(job: Job) -> str:
    """`exit code 3`, `exit code 0, signal 9 (SIGKILL)` or `exit code unknown`."""
    code = "exit code unknown" if job.exit_code is None else f"exit code {job.exit_code}"
    if not job.exit_signal:
        return code
    try:
        name = signal.Signals(job.exit_signal).name
    except ValueError:
        return f"{code}, signal {job.exit_signal}"
    return f"{code}, signal {job.exit_signal} ({name})"
