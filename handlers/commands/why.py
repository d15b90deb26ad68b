"""`/sky why JOBID`: why a job waits (or what became of it), in words, with what to do next.

In Slack it is an action that may read skybot's store: a job Slurm no longer lists is
answered from its recorded history (kept `database.history_days`), and a requeued job's
answer names how its last run was stopped. Where no store is at hand (the console), the
snapshot alone answers.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, replace

from core.buttons.move_to_overcap import move_to_overcap_block
from core.het_jobs import components_line
from core.overcap_move import offers_move_to_overcap
from core.records import Job
from core.view import ClusterView
from handlers.commands.common import answer, job_label, literal, require_data, shown
from handlers.commands.why_explain import LastRequeue, ended, explain
from handlers.reply import Reply
from handlers.router import Command, CommandRequest, UsageError
from handlers.services import Services, rows_cluster
from store.transitions import last_array_task_record, last_job_record, last_requeue

USAGE = "why JOBID"
# Job ids as squeue prints them: 123, 123_4 (array task); a leading # is forgiven. Twelve
# digits at most keeps int() cheap and far from its 4,300-digit limit.
# A het job's component (123+1) is asked about as the job it is part of.
_JOB_ID = re.compile(r"#?([0-9]{1,12})(?:_([0-9]{1,9})|\+[0-9]{1,6})?")
_TASK_RANGE = re.compile(r"([0-9]{1,9})(?:-([0-9]{1,9}))?(?::([0-9]{1,9}))?")


@dataclass(frozen=True, slots=True)
class _Question:
    job_id: int
    task: str | None

    @property
    def label(self) -> str:
        return f"{self.job_id}_{self.task}" if self.task is not None else str(self.job_id)


def _question(request: CommandRequest) -> _Question:
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
    return _Question(int(match[1]), match[2])


def run(request: CommandRequest, view: ClusterView) -> Reply:
    """The answer from the snapshot alone."""
    question = _question(request)
    require_data(view, "slurm")
    job = _find(view, question.job_id, question.task)
    if job is not None:
        return _live_answer(view, request, job, question.task, None)
    return _not_listed(view, request, question, None)


async def act(request: CommandRequest, services: Services) -> Reply:
    """The answer from the snapshot, and from skybot's history for what it no longer shows."""
    question = _question(request)
    if services.view is None or services.writer is None:
        raise UsageError("`/sky why` needs skybot's snapshot, which this skybot does not have.")
    view = services.view()
    require_data(view, "slurm")
    cluster = rows_cluster(view, services.config)
    job = _find(view, question.job_id, question.task)
    if job is not None:
        requeue = None
        if job.restarts:
            found = await services.writer.run(last_requeue, cluster, job.job_id)
            requeue = LastRequeue(*found) if found is not None else None
        return _live_answer(view, request, job, question.task, requeue)
    if question.task is None:
        recorded = await services.writer.run(last_job_record, cluster, question.job_id)
    else:
        recorded = await services.writer.run(
            last_array_task_record,
            cluster,
            question.job_id,
            question.task,
        )
    days = services.config.database.history_days
    return _not_listed(view, request, question, (recorded, days))


def _live_answer(
    view: ClusterView,
    request: CommandRequest,
    job: Job,
    task: str | None,
    requeue: LastRequeue | None,
) -> Reply:
    lines = explain(view, job, request.now, task, requeue)
    if job.het_components:
        lines.append(components_line(job))
    # The button only in the owner's own (private) answer.
    offer = not request.here and offers_move_to_overcap(view, job, request.cluster_user)
    if offer:
        lines.append("*Move to overcap* below moves it there as it is, with the same job id.")
    reply = answer(view, request, lines, "slurm", also=("caps", "limits"))
    if not offer:
        return reply
    return replace(reply, blocks=[*reply.blocks, *move_to_overcap_block(view, job)])


def _not_listed(
    view: ClusterView,
    request: CommandRequest,
    question: _Question,
    history: tuple[Job | None, int] | None,
) -> Reply:
    """A job the snapshot does not list: an array's tasks, its recorded end, or not known."""
    tasks = (
        [j for j in view.snapshot.jobs if j.array_job_id == question.job_id]
        if question.task is None
        else []
    )
    if tasks:
        return answer(view, request, [_array_summary(question.job_id, tasks)], "slurm")
    recorded, days = history if history is not None else (None, 0)
    if recorded is not None:
        who = (
            f"Job {literal(job_label(recorded))} ({literal(recorded.name, 40)}, "
            f"{literal(recorded.user)})"
        )
        if recorded.is_final:
            return answer(view, request, ended(recorded, who, request.now, True), "slurm")
        lines = [
            f"{who} was last seen {literal(recorded.state.lower())}; Slurm no longer lists it "
            "and has not said how it ended yet (Slurm accounting may be behind)."
        ]
        return answer(view, request, lines, "slurm", also=("accounting",))
    kept = f" in the last {days} days" if days else " among Slurm's current jobs"
    lines = [
        f"I don't see job {literal(question.label)}: skybot has no record of it{kept}. "
        "Check the id with `/sky jobs`."
    ]
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
    # One task id that `/sky why` takes: a pending record's tasks are a range ("0-99%10").
    first_tasks = [re.match(r"\[?([0-9]{1,9})", j.array_task or "") for j in tasks]
    first = next((m[1] for m in first_tasks if m), "0")
    example = f"{job_id}_{first}"
    ask = literal(f"/sky why {example}")
    return f"Job {job_id} is a job array ({counts}). Ask about one task, e.g. {ask}."


COMMAND = Command(
    "why",
    USAGE,
    "why a job is pending (or what became of it), and what you can do",
    run,
    act=act,
    details="Explains Slurm's pending reason in words, shows your lab's headroom, your job's "
    "place among those waiting at its cap and Slurm's start estimate, and suggests overcap when "
    "idle GPUs there would fit the job. For an ended job (kept `history_days`): how and when it "
    "ended, its exit code and output. Array tasks: `/sky why 123_4`.",
)
