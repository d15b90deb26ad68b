"""The job form's Slack side: opening it for `/sky submit` with no path, and its two submits.

`/sky submit` answers with a Reply carrying the form (handlers/commands/submit.py); the slash
listener opens it with the command's trigger_id (`open_form`) inside Slack's 3 s. "Review"
checks the form (core/job_form.py) and answers `response_action: errors` (one sentence under
each wrong field) or replaces the form with the script it makes; "Submit" checks it again and
queues it as `/sky submit PATH` queues a file (same queue, tag and outcome DM), the script
going to sbatch on stdin through the runner. The form names its cluster (private_metadata).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from core.job_form import FormInput, check_form, form_choices
from core.job_modal import (
    FORM_CALLBACK,
    REVIEW_CALLBACK,
    done_view,
    read_metadata,
    read_values,
    review_view,
    summary,
)
from core.slack_text import literal
from handlers.clusters import ClusterDesk, ClusterDesks, actions_refusal
from handlers.reply import Reply
from handlers.services import Services
from store.submissions import QueueRefused, SubmissionRequest, enqueue

log = logging.getLogger(__name__)

# views.open must come within Slack's 3 s of the command; what is left is the ack's.
OPEN_SECONDS = 2.0
Answer = dict[str, Any]


async def open_form(client: AsyncWebClient, trigger_id: str, reply: Reply) -> Reply | None:
    """Open `reply`'s modal; None once open (the ack says nothing more), else the reply
    saying it could not be."""
    if reply.modal is None or not trigger_id:
        return reply
    try:
        await asyncio.wait_for(
            client.views_open(trigger_id=trigger_id, view=reply.modal), OPEN_SECONDS
        )
    except Exception as error:  # Slack refused, or is slow: the user is told, and can retry
        cluster = read_metadata(reply.modal.get("private_metadata"))[0]
        log.warning("could not open the job form of %s: %s", cluster, str(error)[:200])
        return reply
    return None


def register_form(app: AsyncApp, desks: ClusterDesks, services: Services) -> None:
    """The form's Review and the review's Submit, each acked with its answer."""

    @app.view(FORM_CALLBACK)
    async def reviewed(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack(**await answer_submission(body, desks, services, submit=False))

    @app.view(REVIEW_CALLBACK)
    async def submitted(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack(**await answer_submission(body, desks, services, submit=True))


def _update(cluster: str, markdown: str) -> Answer:
    return {"response_action": "update", "view": done_view(cluster, markdown)}


async def answer_submission(
    body: dict[str, Any], desks: ClusterDesks, services: Services, *, submit: bool
) -> Answer:
    """The ack to a view_submission of the form (`submit` False) or of its review (True),
    on the cluster the view names."""
    view = body.get("view") or {}
    cluster, carried = read_metadata(view.get("private_metadata"))
    desk = desks.named(cluster) if cluster else desks.default
    if desk is None:
        return _update(cluster, "This form names a cluster skybot does not serve: nothing done.")
    team = str((body.get("team") or {}).get("id") or view.get("team_id") or "")
    slack_user = str((body.get("user") or {}).get("id") or "")
    on = desk.services or services
    try:
        user = on.identity.cluster_user(team, slack_user)
        user = user or await on.identity.resolve(team, slack_user)
        if user is None:
            return _update(desk.name, "Link your cluster account first: `/sky link YOUR_USER`.")
        tag = hashlib.sha256(f"{team}/{desk.name}/{view.get('id')}".encode()).hexdigest()
        asker = _Asker(team, slack_user, user, cluster if desks.several else "", tag[:32])
        if submit:
            return await _queue(desk, on, asker, carried)
        return _review(desk, on, asker, read_values((view.get("state") or {}).get("values") or {}))
    except Exception:
        log.exception("the job form of %s on %s failed", slack_user[:20], desk.name)
        return _update(desk.name, "Sorry, skybot hit an internal error; its log has the details.")


@dataclass(frozen=True, slots=True)
class _Asker:
    team_id: str
    user_id: str
    cluster_user: str
    # The cluster's name where skybot serves several ("": one, not named in answers).
    named: str
    # The submission's tag, from the modal's view id: a Submit Slack sends twice (a retry,
    # a second click after a slow ack) finds the first submission, never queues another.
    form_tag: str


def _review(desk: ClusterDesk, services: Services, asker: _Asker, form: FormInput) -> Answer:
    """The script the form makes, or what is wrong with it, field by field."""
    view = desk.view()
    checked = check_form(form, form_choices(view, asker.cluster_user))
    if isinstance(checked, dict):
        log.info("job form refused on %s: %s", desk.name, ", ".join(sorted(checked)))
        return {"response_action": "errors", "errors": checked}
    script = checked.script(services.config.template, view)
    said = summary(asker.cluster_user, asker.named, checked.partition, checked.step.workdir)
    return {"response_action": "update", "view": review_view(desk.name, form, said, script)}


async def _queue(desk: ClusterDesk, services: Services, asker: _Asker, form: FormInput) -> Answer:
    """The reviewed form, checked again against the latest snapshot, queued."""
    if not desk.cluster.acts_through_runner:
        return _update(desk.name, actions_refusal(desk.cluster))
    if services.writer is None or services.submissions is None:
        return _update(desk.name, "Submitting is not enabled on this skybot.")
    view = desk.view()
    checked = check_form(form, form_choices(view, asker.cluster_user))
    if isinstance(checked, dict):
        wrong = " ".join(checked.values())
        return _update(
            desk.name,
            f"The cluster changed since the review: {wrong} Open the form "
            "again with `/sky submit`.",
        )
    asked = SubmissionRequest(
        team_id=asker.team_id,
        user_id=asker.user_id,
        cluster_user=asker.cluster_user,
        script=checked.step.workdir,
        options={"partition": checked.partition},
        script_text=checked.script(services.config.template, view),
        tag=asker.form_tag,
    )
    try:
        queued = await services.writer.run(
            enqueue, services.cluster_name, asked, services.config.submit, time.time()
        )
    except QueueRefused as refusal:
        return _update(desk.name, str(refusal))
    services.submissions.wake()
    log.info("job form of %s queued on %s as #%d", asker.cluster_user, desk.name, queued.id)
    return _update(
        desk.name,
        f"Queued as #{queued.id}: the job form's script in {literal(checked.step.workdir)}, as "
        f"{literal(asker.cluster_user)}. I'll DM you the job id, or sbatch's error, in a moment.",
    )
