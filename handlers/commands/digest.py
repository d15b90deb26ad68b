"""`/sky digest [LAB] [on|off]`: the weekly lab digest — preview it, or choose where it goes.

A lab's members turn it on in the channel that should get it; anyone can preview any lab's.
The preview is this very moment's last seven days; the posted digest covers the week up to
the configured posting time (scheduler/digest.py).
"""

from __future__ import annotations

import time
from datetime import datetime

from core.cluster_config import LabConfig
from core.digest import WEEK, digest_lines, digest_title
from core.view import ClusterView
from handlers.commands.common import find_lab, lab_names, literal, not_linked
from handlers.reply import Reply, context, section
from handlers.router import Command, CommandRequest, UsageError
from handlers.services import Services
from store.digests import (
    DigestChannel,
    add_digest_channel,
    digest_channels,
    lab_week,
    remove_digest_channel,
)

USAGE = "digest [LAB] [on|off]"
SWITCHES = ("on", "off")


async def digest(request: CommandRequest, services: Services) -> Reply:
    if services.writer is None or services.view is None:
        return Reply("The weekly digest is not available in this skybot.")
    view = services.view()
    words = list(request.args)
    switch = words.pop().lower() if words and words[-1].lower() in SWITCHES else None
    if len(words) > 1:
        raise UsageError(f"Usage: `/sky {USAGE}`, for example `/sky digest hoffman-lab on`.")
    lab = find_lab(view, words[0]) if words else _askers_lab(request, view)
    if switch is None:
        return await _preview(request, services, lab)
    return await _switch(request, services, view, lab, switch == "on")


def _askers_lab(request: CommandRequest, view: ClusterView) -> LabConfig:
    if not request.cluster_user:
        raise not_linked("digest LAB")
    labs = view.labs_of_user(request.cluster_user)
    if len(labs) != 1:
        raise UsageError(f"Name the lab: `/sky {USAGE}`. Labs: {lab_names(view)}.")
    return labs[0]


async def _switch(
    request: CommandRequest, services: Services, view: ClusterView, lab: LabConfig, on: bool
) -> Reply:
    assert services.writer is not None
    if not request.channel_id.startswith(("C", "G")):
        raise UsageError(
            f"Run {literal(f'/sky digest {lab.name} ' + ('on' if on else 'off'))} in the channel "
            "that should (or should no longer) get the digest; skybot must be a member there."
        )
    if not request.cluster_user:
        raise not_linked(f"digest {lab.name} on")
    if lab not in view.labs_of_user(request.cluster_user):
        raise UsageError(
            f"Only members of *{literal(lab.name)}* can turn its digest on or off, and "
            f"{literal(request.cluster_user)} is not one."
        )
    channel = request.channel_id
    when = _schedule(services)
    if on:
        subscription = DigestChannel(
            lab.name, channel, request.team_id, request.user_id, time.time()
        )
        if not await services.writer.run(add_digest_channel, subscription):
            return Reply(f"<#{channel}> already gets *{literal(lab.name)}*'s digest {when}.")
        return Reply(
            f"Done: <#{channel}> will get *{literal(lab.name)}*'s weekly digest {when} — GPU-hours "
            "by user, overcap use, preemptions and storage growth, with a chart. skybot must "
            "be a member of this channel (`/invite @skybot`). "
            f"{literal('/sky digest ' + lab.name)} shows this week's so far."
        )
    if not await services.writer.run(remove_digest_channel, lab.name, channel):
        return Reply(f"<#{channel}> does not get *{literal(lab.name)}*'s digest; nothing to stop.")
    return Reply(f"Done: <#{channel}> will no longer get *{literal(lab.name)}*'s weekly digest.")


async def _preview(request: CommandRequest, services: Services, lab: LabConfig) -> Reply:
    assert services.writer is not None
    now = request.now or time.time()
    week = await services.writer.run(
        lab_week,
        (services.config.cluster_of_lab(lab.name) or services.config.default_cluster).name,
        lab.name,
        lab.account,
        lab.storage_roots,
        now - WEEK,
        now,
    )
    channels = await services.writer.run(digest_channels, lab.name)
    tz = datetime.now().astimezone().tzinfo
    assert tz is not None
    title = f"{digest_title(week, tz)} (so far)"
    lines = digest_lines(week, services.config.digest.top_users)
    if channels:
        where = ", ".join(f"<#{c.channel}>" for c in channels)
        footer = f"Posted {_schedule(services)} in {where}."
    else:
        footer = (
            f"Not posted anywhere yet: {literal(f'/sky digest {lab.name} on')} in your lab's "
            "channel "
            f"posts it {_schedule(services)}."
        )
    blocks = [section(f"*{title}*"), *(section(line) for line in lines), context(footer)]
    return Reply("\n".join([title, *lines, footer]), blocks)


def _schedule(services: Services) -> str:
    settings = services.config.digest
    return f"every {settings.weekday.capitalize()} at {settings.hour:02d}:00"


COMMAND = Command(
    "digest",
    USAGE,
    "a lab's week: GPU-hours by user, overcap, preemptions, storage; weekly in a channel",
    details=(
        "Without on/off, shows the last seven days now (only to you). `on` in a channel posts "
        "the digest there every week, with a chart; lab members only. `off` stops it."
    ),
    act=digest,
)
