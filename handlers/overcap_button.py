"""*Move to overcap*: a job waiting at its lab's cap moves to idle overcap GPUs, as its owner.

`/sky why` offers the button to the job's owner when core/overcap_move.py says it fits. Like
Cancel (handlers/actions.py), the button only names a job and grants nothing: every click is
checked again against the latest snapshot (the clicking Slack user's own linked account, the
job still pending, theirs), the click is acked at once and the runner's work goes on in a
task, and the outcome replaces the message through the click's response_url. The runner
checks ownership and state again with squeue, and Slurm once more when it updates the job.

`ACTION_IDS` lists the actions this module handles; the app manifest's interactivity setting
is tested against it (tests/test_deploy_files.py).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond

from core.blocks import Block
from core.records import Job
from core.runner_contract import PLAIN_JOB_ID, move_to_overcap_request
from core.slack_text import literal
from core.view import ClusterView
from handlers.actions import cancelling
from handlers.click_answers import answer_later
from handlers.clicks import LINK_FIRST, BackgroundWork, click_of, not_yours
from handlers.job_actions import ActionOutcome
from handlers.services import Services
from store.reader import SnapshotCache

log = logging.getLogger(__name__)

MOVE_TO_OVERCAP = "skybot_move_to_overcap"
# Block Kit wants action ids unique within a message, so the button's id names its job.
MOVE_PATTERN = re.compile(rf"^{MOVE_TO_OVERCAP}(:[0-9]+)?$")
ACTION_IDS = frozenset({MOVE_TO_OVERCAP})
ACTION_PATTERNS = (MOVE_PATTERN,)
# The action's name in handlers/job_actions.py (one action per job at a time).
MOVE = "move-to-overcap"


def where_to(partition: str, account: str) -> str:
    """ "partition `overcap`, account `overcap`" (no account when overcap needs none)."""
    account_part = f", account {literal(account)}" if account else ""
    return f"partition {literal(partition)}{account_part}"


def move_to_overcap_block(view: ClusterView, job: Job) -> list[Block]:
    """An actions block with the button and its confirm dialog (which says what it costs)."""
    label = str(job.job_id)
    target = where_to(view.overcap_partition, view.overcap_account)
    return [
        {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "action_id": f"{MOVE_TO_OVERCAP}:{label}",
                    "text": {"type": "plain_text", "text": "Move to overcap"},
                    "value": label,
                    "style": "primary",
                    "confirm": {
                        "title": {"type": "plain_text", "text": "Move this job to overcap?"},
                        "text": {
                            "type": "mrkdwn",
                            "text": f"Job {literal(label)} {literal(job.name, 40)} moves to "
                            f"{target} (as you), keeping its job id. There it is *preemptible*: "
                            "when a lab needs those GPUs, Slurm stops it and requeues it. "
                            "Save checkpoints.",
                        },
                        "confirm": {"type": "plain_text", "text": "Move it"},
                        "deny": {"type": "plain_text", "text": "Keep it waiting"},
                    },
                }
            ],
        }
    ]


async def move_clicked(
    view: ClusterView, services: Services, team_id: str, user_id: str, label: str
) -> str:
    """What a click on Move to overcap did, in a sentence, after every check."""
    if not PLAIN_JOB_ID.fullmatch(label):
        return "That button does not name a job skybot can move."
    identity = services.identity.lookup(team_id, user_id)
    if identity is None:
        return LINK_FIRST
    me = identity.cluster_user
    job = view.jobs_by_id.get(int(label))
    if job is None or job.state != "PENDING":
        return (
            f"Job {literal(label)} is no longer pending (it started, ended or was cancelled): "
            "nothing was moved."
        )
    if job.user != me:
        return not_yours(label, job.user, me)

    async def move() -> ActionOutcome:
        # Run after any other action on the job: one that cancelled it leaves nothing to move.
        if cancelling(services, job):
            text = f"Job {literal(label)} was cancelled just now: nothing was moved."
            return ActionOutcome(text, False)
        return await _move(services, me, job)

    return (await services.job_actions.perform(label, MOVE, move)).text


async def _move(services: Services, me: str, job: Job) -> ActionOutcome:
    label = str(job.job_id)
    slurm = services.config.slurm
    request = move_to_overcap_request(label, slurm.overcap_partition, slurm.overcap_account)
    reply = await services.runner(me, request)
    if not reply.get("ok"):
        error = literal(reply.get("error", "unknown"))
        return ActionOutcome(f"Slurm did not move job {literal(label)}: {error}", False)
    target = where_to(slurm.overcap_partition, slurm.overcap_account)
    return ActionOutcome(
        f"Moved job {literal(label)} {literal(job.name, 60)} to {target} (as {literal(me)}), "
        "with the same job id: it starts on idle GPUs there, and is requeued when a lab "
        "needs them.",
        True,
    )


def register_listeners(app: AsyncApp, cache: SnapshotCache, services: Services) -> None:
    working = BackgroundWork()

    @app.action(MOVE_PATTERN)
    async def move(ack: AsyncAck, respond: AsyncRespond, body: dict[str, Any]) -> None:
        await ack()
        click = click_of(body)

        async def act() -> None:
            try:
                outcome = await move_clicked(
                    cache.current(), services, click.team_id, click.user_id, click.value
                )
            except Exception:
                log.exception("move-to-overcap button failed")
                shown = literal(f"/sky why {click.value}")
                outcome = f"skybot could not act on that click; {shown} shows where the job is."
            await answer_later(
                respond,
                {"text": outcome, "replace_original": True},
                user_id=click.user_id,
                dm=services.dm,
                what=f"the outcome of {click.user_id}'s Move click on {click.value[:20]!r}",
            )

        working.start(act())
