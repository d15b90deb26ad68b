"""*Move to overcap*: a job waiting at its lab's cap moves to idle overcap GPUs, as its owner.

`/sky why` offers the button (core/buttons/move_to_overcap.py) to the job's owner when
core/overcap_move.py says it fits. Like Cancel, the button only names a job and grants
nothing: every click is checked again against the latest snapshot (the clicking Slack user's
own linked account, the job still pending, theirs), and the outcome replaces the message. The
runner checks ownership and state again with squeue, and Slurm once more when it updates the
job.
"""

from __future__ import annotations

from core.buttons import on_this_cluster
from core.buttons.move_to_overcap import MOVE_TO_OVERCAP, move_button_of, where_to
from core.records import Job
from core.runner_contract import move_to_overcap_request
from core.runner_replies import Moved, decode_move
from core.slack_text import literal
from core.view import ClusterView
from handlers.buttons.cancel import cancelling
from handlers.clicks import LINK_FIRST, Answer, Button, Click, not_yours
from handlers.job_actions import ActionOutcome
from handlers.services import Services

# The action's name in handlers/job_actions.py (one action per job at a time).
MOVE = "move-to-overcap"


async def move_clicked(
    view: ClusterView, services: Services, team_id: str, user_id: str, value: str
) -> str:
    """What a click on Move to overcap did, in a sentence, after every check."""
    target = move_button_of(value)
    if target is None or not on_this_cluster(target.cluster, view.cluster_name):
        return "That button does not name a job skybot can move."
    label = str(target.job_id)
    identity = services.identity.lookup(team_id, user_id)
    if identity is None:
        return LINK_FIRST
    me = identity.cluster_user
    job = view.jobs_by_id.get(target.job_id)
    if job is None or job.state != "PENDING":
        return (
            f"Job {literal(label)} is no longer pending (it started, ended or was cancelled): "
            "nothing was moved."
        )
    if job.user != me:
        return not_yours(label, job.user, me)

    async def move() -> ActionOutcome:
        # Run after any other action on the job: one that cancelled it leaves nothing to move.
        if cancelling(view, services, job):
            text = f"Job {literal(label)} was cancelled just now: nothing was moved."
            return ActionOutcome(text, False)
        return await _move(view, services, me, job)

    return (await services.job_actions.perform(view.cluster_name, label, MOVE, move)).text


async def _move(view: ClusterView, services: Services, me: str, job: Job) -> ActionOutcome:
    label = str(job.job_id)
    request = move_to_overcap_request(label, view.overcap_partition, view.overcap_account)
    reply = decode_move(await services.runner(me, request))
    if not isinstance(reply, Moved):
        return ActionOutcome(f"Slurm did not move job {literal(label)}: {reply.shown}", False)
    target = where_to(reply.partition, reply.account or "")
    return ActionOutcome(
        f"Moved job {literal(label)} {literal(job.name, 60)} to {target} (as {literal(me)}), "
        "with the same job id: it starts on idle GPUs there, and is requeued when a lab "
        "needs them.",
        True,
    )


async def clicked(click: Click, view: ClusterView, services: Services) -> Answer:
    return Answer(await move_clicked(view, services, click.team_id, click.user_id, click.value))


def _failed(click: Click) -> str:
    target = move_button_of(click.value)
    if target is None:
        return "skybot could not act on that click."
    named = f" --cluster {target.cluster}" if target.cluster else ""
    shown = literal(f"/sky why {target.job_id}{named}")
    return f"skybot could not act on that click; {shown} shows where the job is."


BUTTON = Button(MOVE_TO_OVERCAP, clicked, _failed)
