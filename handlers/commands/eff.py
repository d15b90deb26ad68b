"""`/sky eff JOBID`: the efficiency lines a job-end DM has, on demand, for your ended jobs.

CPU efficiency, peak memory and time against what was asked (core/efficiency.py), from
sacct's figures as the poller stored them with the job's end. Read-only: no runner.
"""

from __future__ import annotations

import re

from core.efficiency import EfficiencyPolicy, efficiency_lines
from core.job_facts import shown_label
from core.slack_text import literal
from handlers.commands.common import not_linked, own_recorded_job, shown
from handlers.reply import Reply, simple
from handlers.router import Command, CommandRequest, UsageError
from handlers.services import Services

USAGE = "eff JOBID"
_PLAIN_JOB_ID = re.compile(r"[0-9]{1,10}")
# On demand every job is shown, however short (a DM leaves out those under
# notifications.efficiency_min_minutes).
ON_DEMAND = EfficiencyPolicy(min_seconds=0.0)


async def eff(request: CommandRequest, services: Services) -> Reply:
    me = request.cluster_user
    if me is None:
        raise not_linked(USAGE)
    if len(request.args) != 1 or not _PLAIN_JOB_ID.fullmatch(request.args[0].lstrip("#")):
        typed = f" ({shown(' '.join(request.args))})" if request.args else ""
        raise UsageError(f"Usage: `/sky {USAGE}`, a job number like 1234{typed}.")
    job_id = int(request.args[0].lstrip("#"))
    job = await own_recorded_job(services, job_id, me, "`/sky eff` shows your own jobs.")
    label = f"Job {shown_label(job)} {literal(job.name)}"
    if not job.is_final:
        return simple(
            f"{label} is {literal(job.state.lower())}: its efficiency is known once it has "
            "ended (skybot DMs it with the end, or ask again then)."
        )
    if job.usage is None:
        return simple(
            f"{label} ended ({literal(job.state.lower())}), but Slurm accounting (sacct) gave "
            "skybot no usage figures for it."
        )
    lines = efficiency_lines(job.usage, ON_DEMAND, timed_out=job.state == "TIMEOUT")
    if not lines:
        return simple(f"{label} ended, but sacct recorded no CPU, memory or time figures for it.")
    return simple("\n".join([f"{label} ({literal(job.state.lower())}):", *lines]))


COMMAND = Command(
    "eff",
    USAGE,
    "how well one of your ended jobs used its CPUs, memory and time",
    act=eff,
    details="The figures a job-end DM shows (from sacct), with advice when far off.",
)
