"""`/sky jobs [USER]`: someone's running and pending jobs, like a readable squeue."""

from __future__ import annotations

from dataclasses import replace

from core.buttons.cancel import cancel_block
from core.records import Job
from core.view import ClusterView
from handlers.commands.common import (
    answer,
    at_most_one,
    bounded,
    check_user_name,
    did_you_mean,
    format_duration,
    format_job_gpus,
    job_label,
    known_users,
    literal,
    not_linked,
    plural,
    require_data,
)
from handlers.commands.reasons import reason_code, short_reason
from handlers.reply import Reply
from handlers.router import Command, CommandRequest

USAGE = "jobs [USER]"


def run(request: CommandRequest, view: ClusterView) -> Reply:
    arg = at_most_one(request, USAGE)
    if arg is not None:
        user = check_user_name(arg)
    elif request.cluster_user:
        user = request.cluster_user
    else:
        raise not_linked(USAGE)
    require_data(view, "slurm")
    jobs = active_jobs(view, user)
    if not jobs:
        return answer(view, request, [_nobody_home(view, user, arg is None)], "slurm")
    reply = answer(
        view, request, jobs_lines(user, jobs, request.now), "slurm", also=("accounting",)
    )
    if user != request.cluster_user or request.here:
        return reply  # buttons only on your own jobs, in your own (private) answer
    return replace(reply, blocks=[*reply.blocks, *cancel_block(view, jobs)])


def active_jobs(view: ClusterView, user: str) -> list[Job]:
    """The user's running (and completing/suspended) jobs first, then pending, by job id."""
    jobs = [j for j in view.jobs_by_user.get(user, ()) if j.is_active]
    jobs.sort(key=lambda j: (j.state == "PENDING", j.job_id))
    return jobs


def jobs_lines(user: str, jobs: list[Job], now: float) -> list[str]:
    """A head line with the counts, then one bounded line per job."""
    pending = sum(j.state == "PENDING" for j in jobs)
    running = len(jobs) - pending
    gpus = sum(j.gpus for j in jobs if j.state != "PENDING")
    head = f"*{literal(user)}*: {running} running ({plural(gpus, 'GPU')}), {pending} pending"
    return [head, *bounded([job_line(j, now) for j in jobs])]


def job_line(job: Job, now: float) -> str:
    name = literal(job.name, 40)
    parts = f" ({len(job.het_components)} components)" if job.het_components else ""
    return (
        f"{literal(job_label(job))}{parts} {name} · {literal(job.partition)} · "
        f"{format_job_gpus(job.gpus_by_type, job.shards_by_type)} · {_status(job, now)}"
    )


def _status(job: Job, now: float) -> str:
    if job.state == "PENDING":
        code = reason_code(job.reason)
        phrase = short_reason(job.reason)
        return f"pending: {phrase} ({literal(code)})" if phrase else f"pending ({literal(code)})"
    state = job.state.lower()
    if job.start_time is None:
        return state
    return f"{state} {format_duration(now - job.start_time)}"


def _nobody_home(view: ClusterView, user: str, is_asker: bool) -> str:
    if is_asker:
        return f"You ({literal(user)}) have no running or pending jobs."
    line = f"{literal(user)} has no running or pending jobs."
    lab = view.lab(user)
    if lab is not None:
        return f"{line} {literal(lab.name)} is a lab — try {literal('/sky gpus ' + lab.name)}."
    if user not in known_users(view):
        hint = did_you_mean(user, known_users(view))
        if hint:
            line += f" Did you mean {literal(hint)}?"
    return line


COMMAND = Command(
    "jobs",
    USAGE,
    "running and pending jobs (yours by default) with GPUs, elapsed time or pending reason",
    run,
    "Running jobs come first. `/sky why JOBID` explains a pending job in detail.",
)
