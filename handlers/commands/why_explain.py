"""The words of `/sky why`: what a job is waiting for, how a running job is doing, what became
of an ended one. Pure functions of the view, the job and the time; handlers/commands/why.py
finds the job (in the snapshot, or in skybot's history) and answers."""

from __future__ import annotations

import time
from dataclasses import dataclass

from core.cluster_config import LabConfig
from core.job_facts import (
    never_ran,
    output_path,
    refused_at_submission,
    requeue_cause,
    run_seconds,
    slurm_job_id,
)
from core.overcap_move import overcap_nodes_that_fit
from core.records import Job
from core.transitions import Transition
from core.view import ClusterView
from handlers.commands.common import (
    format_counts,
    format_duration,
    format_job_gpus,
    gpu_type_name,
    job_label,
    lab_for_account,
    literal,
    overcap_flags,
    plural,
)
from handlers.commands.gpus import cap_phrase
from handlers.commands.reasons import is_capacity, is_gpu_cap, long_reason, reason_code
from handlers.commands.why_limits import limit_sentence, reservation_lines
from handlers.commands.why_priority import priority_lines
from handlers.reply import truncate

_FINAL_WORDS = {
    "COMPLETED": "completed",
    "FAILED": "failed",
    "TIMEOUT": "was stopped at its time limit",
    "CANCELLED": "was cancelled",
    "OUT_OF_MEMORY": "ran out of memory",
    "NODE_FAIL": "ended because its node failed",
    "PREEMPTED": "was preempted (another job needed its GPUs)",
    "BOOT_FAIL": "failed because its node did not boot",
    "DEADLINE": "missed its deadline",
}
# How the run before a requeue ended, in words (core/job_facts.py requeue_cause).
_REQUEUE_CAUSES = {
    "PREEMPTED": "was preempted: a job with priority needed its GPUs",
    "NODE_FAIL": "was stopped because its node failed",
    "REQUEUED": "was requeued with `scontrol requeue` (by an admin, or by its owner)",
}
# Reasons under which a job cannot start whatever the scheduler plans: no estimate is due.
_NEVER_ESTIMATED = frozenset(
    {"JobHeldUser", "JobHeldAdmin", "DependencyNeverSatisfied", "Dependency", "BeginTime"}
)


@dataclass(frozen=True, slots=True)
class LastRequeue:
    """The job's latest requeue as skybot recorded it: the job then, and when it was seen."""

    job: Job
    seen_at: float


def explain(
    view: ClusterView,
    job: Job,
    now: float,
    task: str | None = None,
    requeue: LastRequeue | None = None,
) -> list[str]:
    who = f"Job {literal(job_label(job))} ({literal(job.name, 40)}, {literal(job.user)})"
    if job.state == "PENDING":
        return _pending(view, job, who, now, task, requeue)
    if job.is_active:
        return _active(view, job, who, now, requeue)
    if job.state in _FINAL_WORDS:
        return ended(job, who, now)
    return [f"{who} is in state {literal(job.state)}."]


def requeue_sentence(job: Job, now: float, requeue: LastRequeue | None) -> str:
    """ "It has been requeued 2 times; the last run was preempted … 3 min ago, after 8 s.",
    with Slurm's own times for that run where sacct listed it."""
    head = f"It has been requeued {plural(job.restarts, 'time')}"
    if requeue is None:
        return head + "."
    cause = requeue_cause(requeue.job)
    run = requeue.job.earlier_run
    if cause is None or run is None:
        return head + f"; the last time {format_duration(now - requeue.seen_at)} ago."
    when = format_duration(now - (run.end_time or requeue.seen_at))
    ran = ""
    if run.start_time and run.end_time:
        ran = f", after running {format_duration(max(0, run.end_time - run.start_time))}"
    return head + f"; the last run {_REQUEUE_CAUSES[cause]}, {when} ago{ran}."


def _pending(
    view: ClusterView, job: Job, who: str, now: float, task: str | None, requeue: LastRequeue | None
) -> list[str]:
    code = reason_code(job.reason)
    lab = lab_for_account(view, job.account)
    lines = [
        f"{who} is pending in {literal(job.partition)} (account {literal(job.account)}), "
        f"asking for {format_job_gpus(job.gpus_by_type, job.shards_by_type)}."
    ]
    if job.restarts:
        lines.append(requeue_sentence(job, now, requeue))
    if code == "BeginTime" and job.restarts:
        lines.append("Slurm holds a requeued job briefly before it may start again.")
    elif is_gpu_cap(code) and lab is not None:
        lines.append(_cap_sentence(view, lab, job))
    else:
        label = slurm_job_id(job, task)
        sentence = limit_sentence(view, job, code, label, now) or long_reason(
            job.reason, job.partition, label
        )
        lines.append(
            sentence
            or f"Slurm gives the reason {literal(code)}; skybot has no explanation for it "
            "(see JOB REASON CODES in `man squeue`)."
        )
    _, _, detail = job.reason.partition(",")
    if detail.strip():
        lines.append(f"Slurm adds: {literal(truncate(detail.strip(), 200))}")
    lines += reservation_lines(view, job, code, slurm_job_id(job, task), now)
    lines += priority_lines(view, job, code)
    if lab is not None and not is_gpu_cap(code):
        lines.append(f"{literal(lab.name)}: {cap_phrase(view, view.usage(lab))}.")
    if lab is not None:
        lines += _place_at_cap(view, lab, job)
    if job.account == view.overcap_account:
        lines.append(
            "It is an overcap job: it starts only on GPUs no lab job is using, and can be "
            "preempted once running."
        )
    elif is_capacity(code):
        lines += _overcap_hint(view, job)
    lines += _start_estimate(job, code, now)
    return lines


# A running job without a time limit is planned by Slurm to end a year after now, so a
# pending job behind it gets a start "in about 364 d 23 h": not a forecast to pass on.
NO_TIME_LIMIT_HORIZON = 360 * 24 * 3600


def _start_estimate(job: Job, code: str, now: float) -> list[str]:
    """Slurm's own forecast: squeue's start time of a pending job is the backfill
    scheduler's expected start (or, under BeginTime, the time it may start from)."""
    start = job.start_time
    if code == "BeginTime":
        if start is not None and start > now:
            return [f"It may not start before {_clock(start)} (in {format_duration(start - now)})."]
        return []
    if code in _NEVER_ESTIMATED:
        return []
    if start is None or start <= now:
        return ["Slurm does not estimate a start for it."]
    if start - now >= NO_TIME_LIMIT_HORIZON:
        return [
            "Slurm has no real estimate: a job it waits for has no time limit, and Slurm "
            "counts such a job as running for a year."
        ]
    return [
        f"Slurm's estimate: it starts at {_clock(start)}, in about "
        f"{format_duration(start - now)} (when running jobs reach their time limits; it is "
        "sooner if they end early)."
    ]


def _clock(timestamp: float) -> str:
    """'1 Dec 14:05 UTC': the cluster's users are in many time zones."""
    return time.strftime("%-d %b %H:%M UTC", time.gmtime(timestamp))


def _place_at_cap(view: ClusterView, lab: LabConfig, job: Job) -> list[str]:
    waiting = view.usage(lab).pending_at_cap
    if len(waiting) < 2 or all(j.job_id != job.job_id for j in waiting):
        return []
    order = sorted(waiting, key=lambda j: (j.submit_time or 0, j.job_id))
    place = next(i for i, j in enumerate(order) if j.job_id == job.job_id) + 1
    return [
        f"It is number {place} of the {len(order)} jobs waiting at {literal(lab.name)}'s cap, "
        "by submit time (Slurm starts them by priority)."
    ]


def _cap_sentence(view: ClusterView, lab: LabConfig, job: Job) -> str:
    usage = view.usage(lab)
    users = f": {format_counts(usage.by_user)}" if usage.by_user else ""
    if usage.cap is None:
        return (
            f"{literal(lab.name)} has reached its GPU limit, using "
            f"{plural(usage.gpus_used, 'GPU')}{users}."
        )
    text = f"{literal(lab.name)} is using {usage.gpus_used}/{plural(usage.cap, 'GPU')}{users}."
    headroom = usage.headroom or 0
    if job.gpus and headroom >= job.gpus:
        return text + " There is room for it now, so it should start at Slurm's next pass."
    short = job.gpus - headroom
    return text + f" It needs {job.gpus}, so it waits until the lab's jobs free {short} more."


def _overcap_hint(view: ClusterView, job: Job) -> list[str]:
    """Nodes reachable through overcap whose idle GPUs would fit the job's request now."""
    fits = [
        f"{literal(node)} ({format_counts(idle)})"
        for node, idle in overcap_nodes_that_fit(view, job)
    ]
    if not fits:
        return []
    wanted = {t: n for t, n in job.gpus_by_type.items() if t}
    where = ", ".join(fits[:3]) + (f" and {len(fits) - 3} more nodes" if len(fits) > 3 else "")
    kind = " ".join(literal(gpu_type_name(t)) for t in wanted) or "GPUs"
    return [
        f"Idle {kind} on overcap would fit it right now: {where}. Resubmit with "
        f"{overcap_flags(view)} to run there (preemptible — save checkpoints)."
    ]


def _active(
    view: ClusterView, job: Job, who: str, now: float, requeue: LastRequeue | None
) -> list[str]:
    where = f" on {literal(job.nodes)}" if job.nodes else ""
    if job.state == "COMPLETING":
        # Its run is over and Slurm is running the epilog. A requeue in that window gives
        # the record the requeue's time as its start: "started 1 s ago" for a 9 s run.
        state = "is completing (its run is over; Slurm is freeing its node)"
    elif job.start_time is None or job.start_time > now:
        state = f"is {literal(job.state.lower())}"
    elif job.state == "RUNNING":
        state = f"has been running for {format_duration(now - job.start_time)}"
    else:  # configuring, suspended
        started = format_duration(now - job.start_time)
        state = f"is {literal(job.state.lower())} (started {started} ago)"
    lines = [
        f"{who} {state}{where}, using {format_job_gpus(job.gpus_by_type, job.shards_by_type)} "
        f"in {literal(job.partition)}."
    ]
    if job.start_time and job.time_limit_minutes and job.state == "RUNNING":
        left = job.start_time + job.time_limit_minutes * 60 - now
        limit = format_duration(job.time_limit_minutes * 60)
        lines.append(f"It has {format_duration(left)} left of its {limit} time limit.")
    if job.account == view.overcap_account:
        lines.append("It runs on overcap, so it can be preempted when a lab needs those GPUs.")
    if job.restarts:
        lines.append(requeue_sentence(job, now, requeue))
    return lines


def ended(job: Job, who: str, now: float, from_history: bool = False) -> list[str]:
    """How and when the job ended, its exit code and its output, as Slurm recorded them."""
    if refused_at_submission(Transition(job, None, job.state, job.restarts)):
        return [
            f"{who} never ran: Slurm refused it when it was submitted "
            f"{_ago(job.submit_time, now)}, and sbatch printed the reason."
        ]
    words = _FINAL_WORDS.get(job.state, f"ended in state {literal(job.state)}")
    if job.state == "CANCELLED" and never_ran(job):
        words = "was cancelled before it started"
    line = f"{who} has ended: it {words} {_ago(job.end_time, now)} ({literal(job.state)}"
    if job.exit_code is not None:
        line += f", exit code {job.exit_code}"
    if job.exit_signal:
        line += f", signal {job.exit_signal}"
    lines = [line + ")."]
    ran = None if never_ran(job) else run_seconds(job, now)
    if ran is not None:
        lines.append(f"It ran for {format_duration(ran)} on {literal(job.nodes or 'its node')}.")
    if job.state == "TIMEOUT" and job.time_limit_minutes:
        lines.append(f"Its time limit was {format_duration(job.time_limit_minutes * 60)}.")
    if job.restarts:
        lines.append(f"It had been requeued {plural(job.restarts, 'time')}.")
    if not (job.state == "CANCELLED" and never_ran(job)):
        lines.append(f"Its output: {literal(output_path(job), 200)}")
    if from_history:
        lines.append("(From skybot's history: Slurm itself no longer lists the job.)")
    return lines


def _ago(timestamp: float | None, now: float) -> str:
    if not timestamp:
        return "at a time Slurm did not record"
    if timestamp > now:
        return f"at {_clock(timestamp)}"
    return f"{format_duration(now - timestamp)} ago, at {_clock(timestamp)}"
