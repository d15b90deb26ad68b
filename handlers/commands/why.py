"""`/sky why JOBID`: why a job waits (or what became of it), in words, with what to do next."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import replace

from core.het_jobs import components_line
from core.overcap_move import offers_move_to_overcap, overcap_nodes_that_fit
from core.records import Job
from core.view import ClusterView, LabInfo
from handlers.commands.common import (
    answer,
    format_counts,
    format_duration,
    format_job_gpus,
    gpu_type_name,
    job_label,
    lab_for_account,
    literal,
    overcap_flags,
    require_data,
    shown,
)
from handlers.commands.gpus import cap_phrase
from handlers.commands.reasons import is_capacity, is_gpu_cap, long_reason, reason_code
from handlers.overcap_button import move_to_overcap_block
from handlers.reply import Reply, truncate
from handlers.router import Command, CommandRequest, UsageError

USAGE = "why JOBID"
# Job ids as squeue prints them: 123, 123_4 (array task); a leading # is forgiven. Twelve
# digits at most keeps int() cheap and far from its 4,300-digit limit.
# A het job's component (123+1) is asked about as the job it is part of.
_JOB_ID = re.compile(r"#?([0-9]{1,12})(?:_([0-9]{1,9})|\+[0-9]{1,6})?")
_TASK_RANGE = re.compile(r"([0-9]{1,9})(?:-([0-9]{1,9}))?(?::([0-9]{1,9}))?")
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


def run(request: CommandRequest, view: ClusterView) -> Reply:
    if len(request.args) != 1:
        raise UsageError(
            f"Give one job id: `/sky {USAGE}` (e.g. `/sky why 123456`). "
            "`/sky jobs` lists your job ids."
        )
    match = _JOB_ID.fullmatch(request.args[0])
    if match is None:
        raise UsageError(
            f"{shown(request.args[0])} is not a job id — job ids are numbers like `123456`, "
            "or `123456_7` for an array task."
        )
    require_data(view, "slurm")
    job_id, task = int(match[1]), match[2]
    job = _find(view, job_id, task)
    if job is not None:
        lines = explain(view, job, request.now)
        if job.het_components:
            lines.append(components_line(job))
        # The button only in the owner's own (private) answer.
        offer = not request.here and offers_move_to_overcap(view, job, request.cluster_user)
        if offer:
            lines.append("*Move to overcap* below moves it there as it is, with the same job id.")
        reply = answer(view, request, lines, "slurm", also=("caps",))
        if not offer:
            return reply
        return replace(reply, blocks=[*reply.blocks, *move_to_overcap_block(view, job)])
    tasks = [j for j in view.snapshot.jobs if j.array_job_id == job_id] if task is None else []
    label = f"{job_id}_{task}" if task is not None else str(job_id)
    lines = (
        [_array_summary(job_id, tasks)]
        if tasks
        else [
            f"I don't see job {label} — it may have finished more than a few minutes ago or "
            "never existed; try `/sky jobs`."
        ]
    )
    return answer(view, request, lines, "slurm")


def _find(view: ClusterView, job_id: int, task: str | None) -> Job | None:
    if task is None:
        job = view.jobs_by_id.get(job_id)
        # A het job's later components have job ids of their own, kept in its record.
        return job or next(
            (j for j in view.snapshot.jobs if any(c.job_id == job_id for c in j.het_components)),
            None,
        )
    in_array = [j for j in view.snapshot.jobs if j.array_job_id == job_id]
    exact = next((j for j in in_array if j.array_task == task), None)
    # Tasks that have not started yet share one record whose task is a range like "[5-9%2]".
    return exact or next((j for j in in_array if _in_range(j.array_task, int(task))), None)


def _in_range(spec: str | None, task: int) -> bool:
    """Whether an array spec such as "[5-9%2]" or "1,3,8-20:4" includes `task`."""
    body = (spec or "").strip("[]").split("%")[0]
    for part in body.split(","):
        m = _TASK_RANGE.fullmatch(part)
        if m is None:
            continue
        lo, hi, step = int(m[1]), int(m[2] or m[1]), int(m[3] or 1) or 1
        if lo <= task <= hi and (task - lo) % step == 0:
            return True
    return False


def _array_summary(job_id: int, tasks: list[Job]) -> str:
    states: dict[str, int] = defaultdict(int)
    for job in tasks:
        states[job.state.lower()] += 1
    counts = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
    example = next((job_label(j) for j in tasks if j.array_task), f"{job_id}_0")
    ask = literal(f"/sky why {example}")
    return f"Job {job_id} is a job array ({counts}). Ask about one task, e.g. {ask}."


def explain(view: ClusterView, job: Job, now: float) -> list[str]:
    who = f"Job {literal(job_label(job))} ({literal(job.name, 40)}, {literal(job.user)})"
    if job.state == "PENDING":
        return _pending(view, job, who, now)
    if job.is_active:
        return _active(view, job, who, now)
    if job.state in _FINAL_WORDS:
        return _finished(job, who, now)
    return [f"{who} is in state {literal(job.state)}."]


def _pending(view: ClusterView, job: Job, who: str, now: float) -> list[str]:
    code = reason_code(job.reason)
    lab = lab_for_account(view, job.account)
    lines = [
        f"{who} is pending in {literal(job.partition)} (account {literal(job.account)}), "
        f"asking for {format_job_gpus(job.gpus_by_type, job.shards_by_type)}."
    ]
    if code == "BeginTime" and job.restarts:
        lines.append(
            f"It was preempted and requeued {job.restarts} times; Slurm holds requeued jobs "
            "briefly before they may start again."
        )
    elif is_gpu_cap(code) and lab is not None:
        lines.append(_cap_sentence(view, lab, job))
    else:
        sentence = long_reason(job.reason, job.partition, job_label(job))
        lines.append(
            sentence
            or f"Slurm gives the reason {literal(code)}; skybot has no explanation for it "
            "(see JOB REASON CODES in `man squeue`)."
        )
        if job.restarts:
            lines.append(f"It has been requeued {job.restarts} times (e.g. after preemption).")
    _, _, detail = job.reason.partition(",")
    if detail.strip():
        lines.append(f"Slurm adds: {literal(truncate(detail.strip(), 200))}")
    if lab is not None and not is_gpu_cap(code):
        lines.append(f"{literal(lab.name)}: {cap_phrase(view, view.usage(lab))}.")
    if job.account == view.overcap_account:
        lines.append(
            "It is an overcap job: it starts only on GPUs no lab job is using, and can be "
            "preempted once running."
        )
    elif is_capacity(code):
        lines += _overcap_hint(view, job)
    if job.start_time is not None and job.start_time > now:
        lines.append(
            f"Slurm's current estimate: it starts in about {format_duration(job.start_time - now)}."
        )
    return lines


def _cap_sentence(view: ClusterView, lab: LabInfo, job: Job) -> str:
    usage = view.usage(lab)
    users = f": {format_counts(usage.by_user)}" if usage.by_user else ""
    if usage.cap is None:
        return (
            f"{literal(lab.name)} has reached its GPU limit, using {usage.gpus_used} GPUs{users}."
        )
    text = f"{literal(lab.name)} is using {usage.gpus_used}/{usage.cap} GPUs{users}."
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


def _active(view: ClusterView, job: Job, who: str, now: float) -> list[str]:
    where = f" on {literal(job.nodes)}" if job.nodes else ""
    if job.start_time is None:
        state = f"is {literal(job.state.lower())}"
    elif job.state == "RUNNING":
        state = f"has been running for {format_duration(now - job.start_time)}"
    else:  # completing, configuring, suspended
        state = (
            f"is {literal(job.state.lower())} (started {format_duration(now - job.start_time)} ago)"
        )
    using = format_job_gpus(job.gpus_by_type, job.shards_by_type)
    lines = [f"{who} {state}{where}, using {using} in {literal(job.partition)}."]
    if job.start_time and job.time_limit_minutes:
        left = job.start_time + job.time_limit_minutes * 60 - now
        limit = format_duration(job.time_limit_minutes * 60)
        lines.append(f"It has {format_duration(left)} left of its {limit} time limit.")
    if job.account == view.overcap_account:
        lines.append("It runs on overcap, so it can be preempted when a lab needs those GPUs.")
    if job.restarts:
        lines.append(f"It was preempted and requeued {job.restarts} times before this run.")
    return lines


def _finished(job: Job, who: str, now: float) -> list[str]:
    when = f" {format_duration(now - job.end_time)} ago" if job.end_time else ""
    line = f"{who} has finished: it {_FINAL_WORDS[job.state]}{when} (`{job.state}`"
    if job.exit_code is not None:
        line += f", exit code {job.exit_code}"
    if job.exit_signal:
        line += f", signal {job.exit_signal}"
    lines = [line + ")."]
    if job.state == "TIMEOUT" and job.time_limit_minutes:
        lines.append(f"Its time limit was {format_duration(job.time_limit_minutes * 60)}.")
    if job.std_out:
        lines.append(f"Its output: {literal(job.std_out, 200)}")
    return lines


COMMAND = Command(
    "why",
    USAGE,
    "why a job is pending (or what became of it), and what you can do",
    run,
    "Explains Slurm's pending reason in words, shows your lab's headroom, and suggests overcap "
    "when idle GPUs there would fit the job. Array tasks: `/sky why 123_4`.",
)
