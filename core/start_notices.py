"""Job start DMs, for those who asked (pure functions).

Opt-in: `/sky notify start on` for every job of one's own, or `/sky submit … --notify-start`
for one job. A start is a job's transition into RUNNING from pending (or configuring), or a
job first seen already running shortly after it started (it started and was seen within one
poll); a job resumed from suspension did not start. One DM per run: the key names the run.
"""

from __future__ import annotations

from datetime import datetime

from core.blocks import section
from core.job_facts import output_path, shown_label
from core.job_notices import JobNotice
from core.log_more import show_log_block
from core.notice_cluster import NoticeCluster
from core.notice_text import format_gpus
from core.slack_text import literal
from core.transitions import Transition

START = "STARTED"
# A job first seen running that started longer ago than this is not news (skybot's first poll,
# or a poll gap): its start was missed, and a late "started" would mislead.
FIRST_SEEN_WITHIN_SECONDS = 600.0
_FROM = frozenset({"PENDING", "CONFIGURING", "REQUEUED"})


def is_start(transition: Transition, seen_at: float) -> bool:
    """Whether this transition is a job's run starting, and still news when seen."""
    if transition.to_state != "RUNNING":
        return False
    if transition.from_state is None:
        start = transition.job.start_time
        return bool(start) and seen_at - float(start or 0) <= FIRST_SEEN_WITHIN_SECONDS
    return transition.from_state in _FROM


def start_notice(transition: Transition, where: NoticeCluster) -> JobNotice:
    """ "Job 123 `train` started on `clippy` (a40:2), time limit ends 18:40", the output
    path and a "Show log" button naming `where` (read as the clicker, who must own the job;
    none where skybot does not read output); the cluster's name where it is shown."""
    job = transition.job
    nodes = literal(job.nodes) if job.nodes else "a node Slurm did not name"
    gpus = format_gpus(job.gpus_by_type) if job.gpus_by_type else "no GPUs"
    headline = (
        f"▶️ Job {shown_label(job)} {literal(job.name)} started on {nodes} ({gpus}), "
        f"{_limit_words(job.start_time, job.time_limit_minutes)}."
    )
    named = f"Cluster {literal(where.shown)} · " if where.shown else ""
    lines = [
        headline,
        f"{named}Partition {literal(job.partition)} · Output: {literal(output_path(job))}",
    ]
    text = "\n".join(lines)
    key = f"jobstart:{where.name}:{job.job_id}:{transition.restarts}"
    button = show_log_block(where.name, job.job_id) if where.reads_output else []
    return JobNotice(START, key, text, [section(text), *button], job)


def _limit_words(start: int | None, limit_minutes: int | None) -> str:
    if not limit_minutes:
        return "no time limit"
    if not start:
        return f"time limit {limit_minutes} min"
    ends = datetime.fromtimestamp(start + 60 * limit_minutes)
    started = datetime.fromtimestamp(start)
    clock = ends.strftime("%H:%M") if ends.date() == started.date() else ends.strftime("%a %H:%M")
    return f"time limit ends {clock}"
