"""`/sky notify [all|end|fail|preempt|off]`: which job events skybot DMs you about.

DMs go to the Slack accounts linked to the job's cluster user, so the choice needs a linked
identity; it is stored per Slack account (team + user id), not per cluster user.
"""

from __future__ import annotations

import time

from core.job_notices import PREFERENCE_MEANINGS, PREFERENCES
from core.slack_text import literal
from handlers.reply import Reply, simple
from handlers.router import Command, CommandRequest, UsageError
from handlers.services import Services
from store.alerts import load_preference, save_preference

USAGE = "notify [all|end|fail|preempt|off]"
CHOICES = "|".join(PREFERENCES)


async def notify(request: CommandRequest, services: Services) -> Reply:
    if len(request.args) > 1:
        raise UsageError(f"Usage: `/sky notify` or `/sky notify {CHOICES}`.")
    user = request.cluster_user
    if user is None:
        identity = services.identity.lookup(request.team_id, request.user_id)
        user = identity.cluster_user if identity else None
    if user is None:
        return simple(
            "Job DMs go to your linked cluster account: link it first with "
            "`/sky link YOUR_CLUSTER_USER`."
        )
    if services.writer is None:
        return simple("Job notifications are not available in this skybot.")
    if not request.args:
        pref, chosen = await current_preference(services, request.team_id, request.user_id)
        return simple(
            f"{preference_line(user, pref, chosen)} Change it with `/sky notify {CHOICES}`."
        )
    wanted = request.args[0].lower()
    if wanted not in PREFERENCES:
        raise UsageError(
            f"`/sky notify` takes one of {', '.join(f'`{p}`' for p in PREFERENCES)}; "
            "for example `/sky notify fail`."
        )
    await services.writer.run(
        save_preference, request.team_id, request.user_id, wanted, time.time()
    )
    if wanted == "off":
        return simple("Job DMs are off. `/sky notify all` turns them back on.")
    return simple(
        f"Done: you will get DMs about {literal(user)}'s jobs for {PREFERENCE_MEANINGS[wanted]}."
    )


async def current_preference(services: Services, team_id: str, user_id: str) -> tuple[str, bool]:
    """(preference, chosen): the Slack user's `/sky notify` choice, else the configured default."""
    default = services.config.notifications.default_preference
    if services.writer is None:
        return default, False
    chosen = await services.writer.run(load_preference, team_id, user_id)
    return chosen or default, chosen is not None


def preference_line(user: str, pref: str, chosen: bool) -> str:
    how = "your choice" if chosen else "the default"
    meaning = PREFERENCE_MEANINGS[pref]
    return f"You get DMs about {literal(user)}'s jobs for: {meaning} (`{pref}`, {how})."


COMMAND = Command(
    "notify",
    USAGE,
    "choose which of your jobs' ends and preemptions skybot DMs you about",
    act=notify,
    details=(
        "`all`: every job end, preemption and requeue. `end`: every end (completed, failed, "
        "cancelled, …). `fail`: failures, timeouts, out-of-memory, node failures and "
        "preemptions. `preempt`: preemptions only. `off`: nothing."
    ),
)
