"""Buttons: acting on a job with one click, as the CLICKING user's own cluster account.

A button only names a job; it grants nothing. Every click is checked again when it arrives:
the Slack user who clicked must be linked to a cluster account, the job must still be
running or pending in the latest snapshot, and it must belong to that account (a forwarded
or shared message gives nobody else's rights). The click is acknowledged at once, within
Slack's 3 s (the runner works in a task of its own); its answer then replaces the message
through the click's response_url, or, for a click on the Home tab (which has none), appears
at the top of the tab, published again.

`ACTION_IDS` lists every action this module handles; the app manifest's interactivity
setting is tested against it (tests/test_deploy_files.py), as the scopes are.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from core.job_notices import job_label
from core.records import Job
from core.runner_contract import cancel_request
from core.slack_text import literal
from core.view import ClusterView
from handlers.click_answers import answer_later
from handlers.clicks import LINK_FIRST, BackgroundWork, click_of, not_yours
from handlers.job_actions import ActionOutcome
from handlers.services import Services
from store.reader import SnapshotCache

log = logging.getLogger(__name__)

CANCEL_JOB = "skybot_cancel_job"
# Block Kit wants action ids unique within a message, so each button's id names its job.
CANCEL_PATTERN = re.compile(rf"^{CANCEL_JOB}(:[0-9_]+)?$")
ACTION_IDS = frozenset({CANCEL_JOB})
# The action's name in handlers/job_actions.py, shared with `/sky cancel`.
CANCEL = "cancel"
ACTION_PATTERNS = (CANCEL_PATTERN,)
# Answers a click on the Home tab (client, team, user, outcome): Slack gives such a click no
# response_url, so the tab is published again with the outcome on top (handlers/home.py).
HomeAnswer = Callable[[AsyncWebClient, str, str, str], Awaitable[None]]
# What a button may carry: a job id as scancel takes it. Slurm's array task text can be
# anything ("1-3%2", or worse), and a button's id and value are not escaped by Slack.
BUTTON_JOB = re.compile(r"[0-9]{1,10}(?:_[0-9]{1,7})?")
# Slack allows 25 elements in an actions block; a long list offers the first few.
MAX_BUTTONS = 5


def cancel_buttons(jobs: list[Job]) -> dict[str, Any]:
    """An actions block with a Cancel button (and its confirm dialog) per job."""
    elements = []
    labelled = [(job, job_label(job)) for job in jobs]
    for job, label in [(j, x) for j, x in labelled if BUTTON_JOB.fullmatch(x)][:MAX_BUTTONS]:
        elements.append(
            {
                "type": "button",
                "action_id": f"{CANCEL_JOB}:{label}",
                "text": {"type": "plain_text", "text": f"Cancel {label}"[:75]},
                "value": label,
                "style": "danger",
                "confirm": {
                    "title": {"type": "plain_text", "text": "Cancel this job?"},
                    "text": {
                        "type": "mrkdwn",
                        "text": f"Job {literal(label)} {literal(job.name, 60)} will be cancelled "
                        "(scancel, as you). This cannot be undone.",
                    },
                    "confirm": {"type": "plain_text", "text": "Cancel the job"},
                    "deny": {"type": "plain_text", "text": "Keep it"},
                },
            }
        )
    return {"type": "actions", "elements": elements}


def cancel_block(jobs: list[Job]) -> list[dict[str, Any]]:
    """The actions block for `jobs`, or nothing when none can carry a button."""
    block = cancel_buttons(jobs)
    return [block] if block["elements"] else []


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
    view: ClusterView, services: Services, team_id: str, user_id: str, label: str
) -> str:
    """What a click on Cancel did, in a sentence, after every check."""
    if not BUTTON_JOB.fullmatch(label):
        return "That button does not name a job skybot can act on."
    identity = services.identity.lookup(team_id, user_id)
    if identity is None:
        return LINK_FIRST
    return await cancel_as_owner(view, services, identity.cluster_user, label)


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
        reply = await services.runner(me, cancel_request(label))
        if reply.get("ok"):
            return ActionOutcome(f"Cancelled job {literal(label)} {name} (as {literal(me)}).", True)
        error = literal(reply.get("error", "unknown"))
        return ActionOutcome(f"Slurm did not cancel job {literal(label)}: {error}", False)

    # Remembered: a second scancel of a job that is ending fails ("already completing").
    return (await services.job_actions.perform(label, CANCEL, scancel, remember=True)).text


def cancelling(services: Services, job: Job) -> bool:
    """skybot is cancelling `job`, or has just cancelled it (the snapshot may lag)."""
    return services.job_actions.in_progress(job_label(job), CANCEL) or (
        job.array_job_id is not None
        and services.job_actions.in_progress(str(job.array_job_id), CANCEL)
    )


def register_listeners(
    app: AsyncApp, cache: SnapshotCache, services: Services, home: HomeAnswer | None = None
) -> None:
    working = BackgroundWork()

    @app.action(CANCEL_PATTERN)
    async def cancel(
        ack: AsyncAck, respond: AsyncRespond, body: dict[str, Any], client: AsyncWebClient
    ) -> None:
        await ack()
        click = click_of(body)

        async def act() -> None:
            try:
                outcome = await cancel_clicked(
                    cache.current(), services, click.team_id, click.user_id, click.value
                )
            except Exception:
                log.exception("cancel button failed")
                outcome = "skybot could not act on that click; try `/sky cancel` instead."
            if click.has_response_url:
                await answer_later(
                    respond,
                    {"text": outcome, "replace_original": True},
                    user_id=click.user_id,
                    dm=services.dm,
                    what=f"the outcome of {click.user_id}'s Cancel click on {click.value[:20]!r}",
                )
            elif home is not None:
                # A click on the Home tab comes without a response_url: the tab shows it.
                await home(client, click.team_id, click.user_id, outcome)
            else:
                log.warning("no way to answer a cancel click from %s: %s", click.user_id, outcome)

        working.start(act())
