"""`/sky gpus [LAB]`: a lab's GPUs against its cap, who uses them, and what waits at the cap."""

from __future__ import annotations

from core.chart_specs import LAB_GPUS, ChartSpec
from core.cluster_config import LabConfig
from core.lab_usage import LabUsage
from core.records import Job
from core.reservations import reserved_now
from core.view import ClusterView
from handlers.commands.common import (
    answer,
    at_most_one,
    find_lab,
    format_counts,
    format_job_gpus,
    job_label,
    lab_names,
    literal,
    overcap_flags,
    plural,
    require_data,
)
from handlers.reply import Reply
from handlers.router import Command, CommandRequest, UsageError

USAGE = "gpus [LAB] [--chart]"
CHART_DAYS = 7
# Jobs listed under "waiting at the cap" before "… and N more".
MAX_PENDING_SHOWN = 8
MAX_USERS_SHOWN = 12


def run(request: CommandRequest, view: ClusterView) -> Reply:
    name = at_most_one(request, USAGE)
    require_data(view, "slurm")
    labs = [find_lab(view, name)] if name is not None else _askers_labs(request, view)
    lines: list[str] = []
    for lab in labs:
        lines += [*lab_lines(view, lab, view.usage(lab)), ""]
    lines.append(_idle_line(view, request.now))
    return answer(view, request, lines, "slurm", also=("caps", "limits"))


def charts(request: CommandRequest, view: ClusterView) -> list[ChartSpec]:
    """`--chart`: each lab's GPU use against its cap over the last week."""
    name = at_most_one(request, USAGE)
    labs = [find_lab(view, name)] if name is not None else _askers_labs(request, view)
    since = request.now - CHART_DAYS * 86400
    return [ChartSpec(LAB_GPUS, lab.name, since, request.now) for lab in labs]


def _askers_labs(request: CommandRequest, view: ClusterView) -> list[LabConfig]:
    labs = view.labs_of_user(request.cluster_user) if request.cluster_user else []
    if not labs:
        raise UsageError(
            f"I don't know your lab — name one: `/sky {USAGE}`. Labs: {lab_names(view)}."
        )
    return labs


def cap_phrase(view: ClusterView, usage: LabUsage) -> str:
    """'4/4 GPUs in use (at cap)', '3/8 GPUs in use (5 free under the cap)', …"""
    if usage.cap is None:
        if view.snapshot.source("caps").taken_at is None:
            return f"{plural(usage.gpus_used, 'GPU')} in use (cap not known yet)"
        return f"{plural(usage.gpus_used, 'GPU')} in use (no GPU cap)"
    state = "at cap" if usage.at_cap else f"{usage.headroom} free under the cap"
    return f"{usage.gpus_used}/{plural(usage.cap, 'GPU')} in use ({state})"


def lab_lines(view: ClusterView, lab: LabConfig, usage: LabUsage) -> list[str]:
    # The same for everyone until the next poll: worked out once per snapshot.
    return view.memo(("gpus", lab.name), lambda: _lab_lines(view, lab, usage))


def _lab_lines(view: ClusterView, lab: LabConfig, usage: LabUsage) -> list[str]:
    lines = [f"*{literal(lab.name)}*: {cap_phrase(view, usage)}"]
    if usage.by_user:
        lines.append(f"• by user: {_top_users(usage.by_user)}")
    if usage.by_type:
        lines.append(f"• by GPU type: {format_counts(usage.by_type)}")
    if usage.overcap_by_user:
        lines.append(
            f"• also on overcap (preemptible): {plural(usage.overcap_gpus, 'GPU')} — "
            f"{_top_users(usage.overcap_by_user)}"
        )
    waiting = usage.pending_at_cap
    if waiting:
        lines.append(f"• {plural(len(waiting), 'job')} waiting at the cap:")
        # Only the lines shown are formatted: a lab can have thousands of jobs waiting.
        lines += [_waiting_line(j) for j in waiting[:MAX_PENDING_SHOWN]]
        if len(waiting) > MAX_PENDING_SHOWN:
            lines.append(f"… and {len(waiting) - MAX_PENDING_SHOWN} more")
    return lines


def _top_users(counts: dict[str, int], limit: int = MAX_USERS_SHOWN) -> str:
    """The biggest users (counts come sorted, largest first), then how many more there are."""
    if len(counts) <= limit:
        return format_counts(counts)
    rest = list(counts.values())[limit:]
    top = format_counts(dict(list(counts.items())[:limit]))
    return f"{top} and {len(rest)} more users with {sum(rest)}"


def _waiting_line(job: Job) -> str:
    gpus = format_job_gpus(job.gpus_by_type, job.shards_by_type)
    return f"    {literal(job_label(job))} {literal(job.user)} {gpus} ({literal(job.reason)})"


def _idle_line(view: ClusterView, now: float) -> str:
    if not view.idle_by_type:
        return "No idle GPUs anywhere in the cluster right now."
    limits = view.snapshot.limits
    reserved = sum(i.count for i in view.idle if reserved_now(limits, i.node, now))
    held = (
        f" ({plural(reserved, 'GPU')} of them on reserved nodes, for the reservations' users only)"
        if reserved
        else ""
    )
    return (
        f"Idle GPUs cluster-wide: {format_counts(view.idle_by_type)}{held} — anyone can use "
        f"them through overcap ({overcap_flags(view)}); `/sky free` shows where."
    )


COMMAND = Command(
    "gpus",
    USAGE,
    "a lab's GPUs in use against its cap, by user and type, and idle GPUs",
    run,
    "Without LAB, shows your own lab(s). Jobs waiting at the cap are those Slurm holds back "
    "with an AssocGrp*/QOS* reason; overcap GPUs do not count against the cap. `--chart` "
    f"also draws the lab's GPU use against its cap over the last {CHART_DAYS} days.",
    charts=charts,
    # A named lab's answer is everyone's; without one, it is the asker's own labs'.
    same_for=lambda args, asker: None if args else asker,
)
