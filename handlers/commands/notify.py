"""`/sky notify [all|end|fail|preempt|off]`: which job events skybot DMs you about.

DMs go to the Slack accounts linked to the job's cluster user, so the choice needs a linked
identity; it is stored per Slack account (team + user id), not per cluster user.

`/sky notify logs [on|off]`: whether failure DMs show the last lines of the job's output (read
as you, shown only in your DM). On unless you turn it off, or an admin turns it off for
everyone (`notifications.log_tail_lines = 0`).

`/sky notify tasks [on|off]`: a DM for each task of a job array, rather than one when the array
starts and one when its last task ends (off by default, as in Slurm's own mail).
"""

from __future__ import annotations

import time

from core.config_schema import PREFERENCES
from core.job_notices import PREFERENCE_MEANINGS
from core.slack_text import literal
from handlers.reply import Reply, simple
from handlers.router import Command, CommandRequest, UsageError
from handlers.services import Services
from store.alerts import (
    load_preference,
    log_tails_wanted,
    save_log_tails_wanted,
    save_preference,
    save_starts_wanted,
    starts_wanted,
)
from store.arrays import save_tasks_wanted, tasks_wanted

USAGE = (
    "notify [all|end|fail|preempt|off] | notify logs [on|off] | notify start [on|off] "
    "| notify tasks [on|off]"
)
CHOICES = "|".join(PREFERENCES)


async def notify(request: CommandRequest, services: Services) -> Reply:
    sub = request.args[0].lower() if request.args else ""
    logs = sub in ("logs", "start", "tasks")
    if len(request.args) > (2 if logs else 1):
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
    if sub == "start":
        return await notify_start(request, services, user)
    if sub == "tasks":
        return await notify_tasks(request, services, user)
    if logs:
        return await notify_logs(request, services, user)
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


async def notify_logs(request: CommandRequest, services: Services, user: str) -> Reply:
    if services.writer is None:  # checked by the caller; here for the type checker
        return simple("Job notifications are not available in this skybot.")
    if services.config.notifications.log_tail_lines <= 0:
        return simple("This skybot does not show job output in DMs: an admin turned it off.")
    shown = (
        "Failure DMs show the last lines of your job's stderr and stdout, read as "
        f"{literal(user)} and shown only in your DM."
    )
    if len(request.args) == 1:
        wanted = await services.writer.run(log_tails_wanted, request.team_id, request.user_id)
        if wanted:
            return simple(f"{shown} `/sky notify logs off` leaves them out.")
        return simple("Failure DMs leave your job's output out. `/sky notify logs on` shows it.")
    choice = request.args[1].lower()
    if choice not in ("on", "off"):
        raise UsageError("Usage: `/sky notify logs on` or `/sky notify logs off`.")
    await services.writer.run(
        save_log_tails_wanted, request.team_id, request.user_id, choice == "on", time.time()
    )
    if choice == "on":
        return simple(f"Done. {shown}")
    return simple("Done: failure DMs will leave your job's output out.")


async def notify_start(request: CommandRequest, services: Services, user: str) -> Reply:
    """`/sky notify start [on|off]`: a DM when each of your jobs starts (off by default)."""
    if services.writer is None:  # checked by the caller; here for the type checker
        return simple("Job notifications are not available in this skybot.")
    if len(request.args) == 1:
        wanted = await services.writer.run(starts_wanted, request.team_id, request.user_id)
        if wanted:
            return simple(f"You get a DM when each of {literal(user)}'s jobs starts. "
                          "`/sky notify start off` stops them.")  # fmt: skip
        return simple(
            "Start DMs are off (the default). `/sky notify start on` sends one when each of "
            f"{literal(user)}'s jobs starts; `/sky submit PATH --notify-start` for one job."
        )
    choice = request.args[1].lower()
    if choice not in ("on", "off"):
        raise UsageError("Usage: `/sky notify start on` or `/sky notify start off`.")
    await services.writer.run(
        save_starts_wanted, request.team_id, request.user_id, choice == "on", time.time()
    )
    if choice == "on":
        return simple(
            f"Done: you will get a DM when each of {literal(user)}'s jobs starts, with the node, "
            "GPUs and when its time limit ends."
        )
    return simple("Done: no more start DMs.")


async def notify_tasks(request: CommandRequest, services: Services, user: str) -> Reply:
    """`/sky notify tasks [on|off]`: a DM per array task (off by default)."""
    if services.writer is None:  # checked by the caller; here for the type checker
        return simple("Job notifications are not available in this skybot.")
    if len(request.args) == 1:
        wanted = await services.writer.run(tasks_wanted, request.team_id, request.user_id)
        if wanted:
            return simple(
                f"You get a DM for each task of {literal(user)}'s job arrays. "
                "`/sky notify tasks off`: one when an array ends instead."
            )
        return simple(
            f"Job arrays of {literal(user)} get one DM when their last task ends (and one when "
            "the first starts, if start DMs are on), the default. `/sky notify tasks on` sends "
            "one for each task; `#SBATCH --mail-type=ARRAY_TASKS` asks it for one array."
        )
    choice = request.args[1].lower()
    if choice not in ("on", "off"):
        raise UsageError("Usage: `/sky notify tasks on` or `/sky notify tasks off`.")
    await services.writer.run(
        save_tasks_wanted, request.team_id, request.user_id, choice == "on", time.time()
    )
    if choice == "on":
        return simple(f"Done: you will get a DM for each task of {literal(user)}'s job arrays.")
    return simple("Done: one DM per job array, when its last task ends.")


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
        "preemptions. `preempt`: preemptions only. `off`: nothing. `logs on|off`: whether "
        "failure DMs show the last lines of your job's output. `start on|off`: a DM when each "
        "of your jobs starts (off unless you turn it on). `tasks on|off`: a DM for each task "
        "of a job array rather than one per array (off unless you turn it on)."
    ),
    about_cluster=False,
)
