"""Cancel: acting on a job with one click, as the CLICKING user's own cluster account.

A button only names a job; it grants nothing. Every click is checked again when it arrives:
the Slack user who clicked must be linked to a cluster account, the job must still be
running or pending in the latest snapshot, and it must belong to that account (a forwarded
or shared message gives nobody else's rights). The answer replaces the clicked message.
`/sky cancel` (handlers/commands/cancel.py) shares the checks and the action.
"""

from __future__ import annotations

from core.buttons import on_this_cluster
from core.buttons.cancel import CANCEL, job_button_of
from core.job_facts import job_label
from core.records import Job
from core.runner_contract import cancel_request
from core.runner_replies import Cancelled, decode_cancel
from core.slack_text import literal
from core.view import ClusterView
from handlers.clicks import LINK_FIRST, Answer, Button, Click, not_yours
from handlers.job_actions import ActionOutcome
from handlers.services import Services

# The action's name in handlers/job_actions.py, shared with `/sky cancel`.
CANCEL_ACTION = "cancel"


def jobs_named(view: ClusterView, label: str) -> list[Job]:
    """The snapshot's jobs that scancel `label` would act on: the job or array task itself,
    for a plain number every task of that array, and for `35_2` also the record of 35's tasks
    still pending together (`35_[2-4]`: Slurm knows which task it holds; every task of an
    array has the one owner)."""
    return [j for jobs in view.jobs_by_user.values() for j in jobs if _is_named(j, label)]


def _is_named(job: Job, label: str) -> bool:
    if job_label(job) == label:
        return True
    head, _, task = label.partition("_")
    if not head.isdigit():
        return False
    if not task:
        return int(head) in (job.job_id, job.array_job_id)
    return job.array_job_id == int(head) and not (job.array_task or "").isdigit()


def active_jobs_named(view: ClusterView, label: str) -> list[Job]:
    return [job for job in jobs_named(view, label) if job.is_active]


async def cancel_clicked(
    view: ClusterView, services: Services, team_id: str, user_id: str, value: str
) -> str:
    """What a click on Cancel did, in a sentence, after every check."""
    target = job_button_of(value)
    if target is None or not on_this_cluster(target.cluster, view.cluster_name):
        return "That button does not name a job skybot can act on."
    identity = services.identity.lookup(team_id, user_id)
    if identity is None:
        return LINK_FIRST
    return await cancel_as_owner(view, services, identity.cluster_user, target.label)


def cancel_refusal(view: ClusterView, me: str, label: str) -> str | None:
    """Why `me` may not cancel `label`, by the snapshot (Slurm checks again), or None."""
    jobs = active_jobs_named(view, label)
    if not jobs:
        return f"Job {literal(label)} is no longer running or pending: there is nothing to cancel."
    owner = next((job.user for job in jobs if job.user != me), None)
    if owner is not None:
        return not_yours(label, owner, me)
    return None


async def cancel_as_owner(view: ClusterView, services: Services, me: str, label: str) -> str:
    """Cancel `label` as `me` if the snapshot says it is `me`'s and still running or pending;
    once, however many clicks and commands ask at the same time."""
    refusal = cancel_refusal(view, me, label)
    if refusal is not None:
        return refusal
    name = literal(active_jobs_named(view, label)[0].name, 60)

    async def scancel() -> ActionOutcome:
        reply = decode_cancel(await services.runner(me, cancel_request(label)))
        if isinstance(reply, Cancelled):
            return ActionOutcome(f"Cancelled job {literal(label)} {name} (as {literal(me)}).", True)
        return ActionOutcome(f"Slurm did not cancel job {literal(label)}: {reply.shown}", False)

    # Remembered: a second scancel of a job that is ending fails ("already completing").
    actions = services.job_actions
    cluster = view.cluster_name
    return (await actions.perform(cluster, label, CANCEL_ACTION, scancel, remember=True)).text


def cancelling(view: ClusterView, services: Services, job: Job) -> bool:
    """skybot is cancelling `job` of `view`'s cluster, or has just cancelled it (the snapshot
    may lag)."""
    actions, cluster = services.job_actions, view.cluster_name
    return actions.in_progress(cluster, job_label(job), CANCEL_ACTION) or (
        job.array_job_id is not None
        and actions.in_progress(cluster, str(job.array_job_id), CANCEL_ACTION)
    )


async def clicked(click: Click, view: ClusterView, services: Services) -> Answer:
    return Answer(await cancel_clicked(view, services, click.team_id, click.user_id, click.value))


BUTTON = Button(
    CANCEL,
    clicked,
    lambda _: "skybot could not act on that click; try `/sky cancel` instead.",
)
