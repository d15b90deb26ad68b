"""Which job state changes become a DM, and what the DM says (pure functions).

A user chooses how much they hear with `/sky notify`:

- `all`: every end of a job, every preemption and every requeue;
- `end`: every final state (completed, failed, timed out, out of memory, cancelled, node
  failure, …);
- `fail`: only what went wrong: failures, timeouts, out of memory, node failures, preemptions
  and requeues;
- `preempt`: only preemptions;
- `off`: nothing.

A preemption on a preemptible partition (`overcap`) shows up as a REQUEUED transition: the
job goes back to PENDING under the same id with a higher restart count, so "pending because
preempted" is covered by it. Transitions to other non-final states (PENDING, RUNNING, …) are
never news. Every DM names the job, its partition, GPUs and runtime, and where its output went,
so the user can act on it without typing a command.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from core.blocks import Block, context, section
from core.cluster_config import ClusterConfig
from core.config_schema import NotificationsConfig
from core.efficiency import EfficiencyPolicy, efficiency_lines
from core.het_jobs import components_line
from core.job_facts import (
    exit_words,
    never_ran,
    output_path,
    refused_at_submission,
    requeue_cause,
    requeue_words,
    run_seconds,
    shown_label,
    stopped_run_seconds,
)
from core.job_output import OutputTail, tail_parts
from core.log_more import more_block
from core.notice_cluster import NoticeCluster, output_unread_line
from core.notice_text import format_duration, format_job_gpus
from core.records import FINAL_STATES, Job
from core.shared_config import SharedConfig, preemptible_on
from core.slack_text import literal
from core.transitions import REQUEUED, Transition

PREFERENCE_MEANINGS = {
    "all": "every job end, preemption and requeue",
    "end": "every job end (completed, failed, cancelled, …), but not preemptions",
    "fail": "failures, timeouts, out-of-memory, node failures and preemptions",
    "preempt": "preemptions only",
    "off": "nothing",
}

# Notice kinds beyond the final states themselves.
PREEMPTED = "PREEMPTED"
REQUEUED_KIND = "REQUEUED"  # a requeue not caused by preemption (admin, node trouble)

_FAILURE_KINDS = frozenset(
    {"FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE"}
)
_INTERRUPTION_KINDS = frozenset({PREEMPTED, REQUEUED_KIND})
# Ends whose DM shows the last lines of the job's output (read as its owner, if they want it).
TAIL_KINDS = frozenset({"FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "DEADLINE", PREEMPTED})

PREEMPT_HINT = (
    "Jobs on a preemptible partition can be stopped whenever a lab needs its GPUs back. "
    "Make them preemptable: save a checkpoint when Slurm signals the job (catch SIGTERM, or "
    "ask for an early warning with `#SBATCH --signal=B:USR1@120`), resume from the latest "
    "checkpoint at start, and keep `#SBATCH --requeue` so Slurm puts the job back in the queue "
    "(see the skynet-overcap-example)."
)


@dataclass(frozen=True, slots=True)
class JobNotice:
    """A DM about one transition; `key` identifies the event, not who receives it."""

    kind: str
    key: str
    text: str
    blocks: list[Block] = field(default_factory=list)
    job: Job | None = None


@dataclass(frozen=True, slots=True)
class Seen:
    """What skybot knows of one transition besides the job's record.

    `at` is when the transition was seen; it stands in for the end of a run Slurm has not
    given an end time for (a requeued job's lost runtime). `run_started` is when the
    interrupted run started, as an earlier poll saw it: once requeued, the job's own
    start_time is Slurm's forecast for its next run. `output` is the end of the job's stderr
    (and stdout) as its owner's runner read it, shown for failures (`TAIL_KINDS`).
    """

    at: float
    run_started: float | None = None
    output: Sequence[OutputTail] = ()


def notice_kind(transition: Transition, preemptible: Collection[str]) -> str | None:
    """What the transition is worth telling, or None if it is not news (e.g. RUNNING)."""
    if transition.to_state == REQUEUED:
        cause = requeue_cause(transition.job)
        if cause is not None:
            return PREEMPTED if cause == "PREEMPTED" else REQUEUED_KIND
        return PREEMPTED if is_preemptible(transition.job, preemptible) else REQUEUED_KIND
    if refused_at_submission(transition):
        return None  # sbatch already told its user why, in the terminal or in skybot's DM
    if transition.to_state in FINAL_STATES:
        return transition.to_state
    return None


def is_preemptible(job: Job, preemptible: Collection[str]) -> bool:
    # A pending job may list several partitions ("short,user-overcap").
    return any(p.strip() in preemptible for p in job.partition.split(","))


def wants(preference: str, kind: str) -> bool:
    """Whether someone with this `/sky notify` preference hears about this kind of event."""
    if preference == "all":
        return True
    if preference == "end":
        return kind in FINAL_STATES
    if preference == "fail":
        return kind in _FAILURE_KINDS or kind in _INTERRUPTION_KINDS
    if preference == "preempt":
        return kind == PREEMPTED
    return False


def decide_job_notice(
    transition: Transition,
    preference: str,
    seen: Seen,
    shared: SharedConfig,
    cluster: ClusterConfig,
) -> JobNotice | None:
    """The DM this transition of `cluster`'s earns under `preference`, or None; what it
    shows is as `shared.notifications` says (`compose_job_notice`)."""
    where = NoticeCluster.of(shared, cluster)
    kind = notice_kind(transition, preemptible_on(shared, cluster))
    if kind is None or not wants(preference, kind):
        return None
    return compose_job_notice(transition, kind, seen, shared.notifications, where)


def notice_key(cluster: str, transition: Transition, kind: str) -> str:
    """`job:<cluster>:<job id>:<run>:<kind>`, one per event whatever poll reports it.

    Interruptions name the run that was interrupted (a REQUEUED with restart count n ends run
    n-1), so sacct's PREEMPTED for a run and squeue's later requeue of it share one key and
    the user hears about that preemption once.
    """
    run = transition.restarts
    if transition.to_state == REQUEUED:
        run = max(0, transition.restarts - 1)
    return f"job:{cluster}:{transition.job.job_id}:{run}:{kind}"


def compose_job_notice(
    transition: Transition,
    kind: str,
    seen: Seen,
    settings: NotificationsConfig,
    where: NoticeCluster,
) -> JobNotice:
    """The DM telling `transition` as `kind`, keyed by `where`'s name, which its buttons
    carry too, naming the cluster where it is shown: failures show at most
    `settings.log_tail_lines` lines of each output tail, and a job that ran at least
    `settings.efficiency_min_minutes` its CPU, memory and time figures from sacct
    (core/efficiency.py)."""
    cluster = where.shown
    job = transition.job
    headline = f"{_EMOJI.get(kind, '🔔')} Job {shown_label(job)} {literal(job.name)} " + _what(
        transition, kind
    )
    facts = [
        *([f"Cluster {literal(cluster)}"] if cluster else []),
        f"Partition {literal(job.partition)}",
        f"GPUs {format_job_gpus(job.gpus_by_type, job.shards_by_type)}"
        if job.gpus_by_type or job.shards_by_type
        else "no GPUs",
    ]
    lines = [headline, " · ".join(facts)]
    if job.het_components:
        lines.append(components_line(job))
    lines.append(_runtime_line(transition, kind, seen))
    efficiency = EfficiencyPolicy(min_seconds=60 * settings.efficiency_min_minutes)
    if job.usage is not None and kind in FINAL_STATES:
        lines.extend(efficiency_lines(job.usage, efficiency, timed_out=kind == "TIMEOUT"))
    lines.append(f"Output: {literal(output_path(job))}")
    advice = _ADVICE.get(kind)
    if kind == PREEMPTED:
        advice = PREEMPT_HINT
    tail_lines, output = settings.log_tail_lines, seen.output
    parts = tail_parts(output, tail_lines) if output and tail_lines and kind in TAIL_KINDS else []
    tails = [part.markdown for part in parts]
    if not where.reads_output and tail_lines and kind in TAIL_KINDS:
        tails = [output_unread_line(where.name)]
        parts = []
    text = "\n".join(lines + ([advice] if advice else []) + tails)
    blocks = [section("\n".join(lines))]
    if advice:
        blocks.append(context(advice))
    blocks.extend(section(tail) for tail in tails)
    # "Show more of the log": the chunk before what is shown, read as the clicker on click.
    blocks.extend(more_block(where.name, job.job_id, parts))
    return JobNotice(kind, notice_key(where.name, transition, kind), text, blocks, job)


def _runtime_line(transition: Transition, kind: str, seen: Seen) -> str:
    """How long the job ran, or for an interruption how much running was lost."""
    job = transition.job
    runtime = (
        _lost_runtime(job, seen.at, seen.run_started)
        if transition.to_state == REQUEUED
        else None
        if never_ran(job)
        else run_seconds(job, seen.at)
    )
    if kind in _INTERRUPTION_KINDS:
        lost = format_duration(runtime) if runtime is not None else "an unknown amount"
        return f"Runtime lost: {lost}, unless the job saved a checkpoint."
    if runtime is not None:
        return f"Runtime: {format_duration(runtime)}"
    if job.restarts:
        return "Runtime: it had not started again since its requeue"
    return "Runtime: it never started"


def _lost_runtime(job: Job, now: float, run_started: float | None) -> float | None:
    """Slurm's own figure where sacct lists the stopped run (a requeue while the job ran its
    epilog ends after the poll that saw it), else from the poll that saw it start."""
    by_slurm = stopped_run_seconds(job)
    if by_slurm is not None:
        return by_slurm
    return run_seconds(job, now, run_started, requeued_at(job))


def requeued_at(job: Job) -> int | None:
    """When Slurm requeued the job, by its own clock: a requeue resets the submit time (seen
    on 22.05 and 24.11), so a requeued job's submit time is when its last run was stopped."""
    return job.submit_time if job.restarts > 0 else None


def _what(transition: Transition, kind: str) -> str:
    job = transition.job
    if kind == "COMPLETED":
        return "completed successfully."
    if kind == "FAILED":
        return f"failed with {exit_words(job)}."
    if kind == "TIMEOUT":
        limit = job.time_limit_minutes
        shown = f" of {format_duration(limit * 60)}" if limit else ""
        return f"reached its time limit{shown} and was stopped."
    if kind == "OUT_OF_MEMORY":
        return "ran out of memory and was killed."
    if kind == "CANCELLED":
        return "was cancelled before it started." if never_ran(job) else "was cancelled."
    if kind == "NODE_FAIL":
        return "ended because its node failed."
    if kind == "BOOT_FAIL":
        return "could not start: its node failed to boot."
    if kind == "DEADLINE":
        return "was stopped at its deadline."
    if kind == PREEMPTED and transition.to_state == REQUEUED:
        return f"was preempted and requeued (restart {transition.restarts})."
    if kind == PREEMPTED:
        return "was preempted: its GPUs were needed by a job with priority."
    if kind == REQUEUED_KIND:
        again = "and will start again from the beginning."
        return f"{requeue_words(job)} (restart {transition.restarts}) {again}"
    return f"is now {literal(transition.to_state)}."


_EMOJI = {
    "COMPLETED": "✅",
    "FAILED": "❌",
    "TIMEOUT": "⏰",
    "OUT_OF_MEMORY": "💥",
    "CANCELLED": "🚫",
    "NODE_FAIL": "⚠️",
    "BOOT_FAIL": "⚠️",
    "DEADLINE": "⏰",
    PREEMPTED: "🔁",
    REQUEUED_KIND: "🔁",
}

_ADVICE = {
    "TIMEOUT": "Ask for more time with `--time`, or checkpoint and resubmit to continue.",
    "OUT_OF_MEMORY": "Ask for more memory with `--mem` or `--mem-per-gpu`.",
    "NODE_FAIL": "This was not your job's fault: resubmit it (or use `--requeue`).",
    "BOOT_FAIL": "This was not your job's fault: resubmit it.",
}
