"""`/sky cancel JOBID`: scancel as the asker, through the runner, for the asker's own job only.

Ownership is checked against the snapshot before the runner is started, as the Cancel button
does: scancel run as someone who does not own the job is refused by Slurm, but only after
slurmctld has logged a "Security violation" for it. A refused cancel starts nothing, so it
costs no rate-limit token (UsageError). The cancel itself is shared with the button
(handlers/buttons/cancel.py): one scancel per job however many ask at once.
"""

from __future__ import annotations

from core.runner_contract import JOB_ID
from core.slack_text import literal
from handlers.buttons.cancel import cancel_as_owner, cancel_refusal, jobs_named
from handlers.commands.common import ago, not_linked
from handlers.reply import Reply, simple
from handlers.router import Command, CommandRequest, UsageError
from handlers.services import Services

USAGE = "Usage: `/sky cancel JOBID` (a job number like 1234 or 1234_5)."


async def cancel(request: CommandRequest, services: Services) -> Reply:
    if not request.cluster_user:
        raise not_linked("cancel JOBID")
    if len(request.args) != 1 or not JOB_ID.fullmatch(request.args[0].lstrip("#")):
        raise UsageError(USAGE)
    if services.view is None:
        raise UsageError("Cancelling is not enabled on this skybot.")
    label = request.args[0].lstrip("#")
    view = services.view()
    if not jobs_named(view, label):
        taken_at = view.snapshot.source("slurm").taken_at
        seen = "never" if taken_at is None else ago(taken_at, request.now)
        raise UsageError(
            f"skybot sees no job {literal(label)} in the queue (its last look: {seen}), so "
            "nothing was cancelled. A job submitted a moment ago shows up after the next poll."
        )
    refusal = cancel_refusal(view, request.cluster_user, label)
    if refusal is not None:
        raise UsageError(refusal)
    return simple(await cancel_as_owner(view, services, request.cluster_user, label))


CANCEL = Command(
    "cancel",
    "cancel JOBID",
    "cancel one of your jobs (scancel as you)",
    act=cancel,
    starts_runner=True,
)
