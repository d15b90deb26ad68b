"""Clicks on "Show more of the log" (failure DMs): the chunk of output before what was shown.

The button (core/log_more.py: failure and start DMs carry it) names only a job, which of its
files, and where the chunk ends. Every click is checked again: the clicking Slack user's own
linked account must own the job, as skybot recorded it (ended jobs are kept with their
transitions for `database.history_days`); the file is the one Slurm reported for that job, never
a path from the button; and it is read by the runner as that account, with the same limits as
the DM (`log_tail_lines`, the bytes those lines may take, `log_tail_seconds`). Someone else
clicking a forwarded DM reads nothing. A read counts against the same per-user limit as the
commands that start the runner; refused clicks cost nothing.

The click is acked at once; the chunk follows as a NEW message in the DM, through the click's
response_url, with its own button for the chunk before it. A follow-up rather than a
replacement: the failure DM (what failed, the efficiency figures, the last lines) stays as it
was, each chunk reads like scrolling further up the file, and no message outgrows Slack's
limits however often the user clicks. Refusals go only to the clicker (ephemeral).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass, field

from core.blocks import Block, section
from core.buttons import on_this_cluster
from core.job_facts import shown_label
from core.job_output import (
    OutputTail,
    stderr_path,
    stdout_path,
    stream_path,
    tail_bytes,
    tail_from_reply,
)
from core.log_more import (
    MAX_OFFSET,
    SHOW_MORE_LOG,
    earlier_chunk,
    more_block,
    parse_more_value,
)
from core.records import Job
from core.runner_contract import tail_request
from core.slack_text import literal
from core.view import ClusterView
from handlers.clicks import Answer, Button, Click
from handlers.services import Services, rows_cluster
from store.transitions import last_job_record

log = logging.getLogger(__name__)

IN_YOUR_DM = (
    "The earlier output is in your DM with skybot: job output is shown only there, "
    "never in a channel."
)


@dataclass(frozen=True)
class MoreAnswer:
    """What a click gets: the chunk for everyone in the DM, or a refusal for the clicker."""

    text: str
    blocks: list[Block] = field(default_factory=list)
    refused: bool = True


async def more_clicked(
    view: ClusterView,
    services: Services,
    team_id: str,
    user_id: str,
    action_id: str,
    value: str,
) -> MoreAnswer:
    """What a click on "Show more" shows, after every check."""
    request = parse_more_value(action_id, value)
    if request is None or not on_this_cluster(request.cluster, view.cluster_name):
        return MoreAnswer("That button does not name a job's output skybot can show.")
    lines = services.config.notifications.log_tail_lines
    if lines <= 0:
        return MoreAnswer("Showing job output is turned off on this cluster.")
    identity = services.identity.lookup(team_id, user_id)
    if identity is None:
        return MoreAnswer(
            "skybot reads output only as your own cluster account: link it first with "
            "`/sky link USER`."
        )
    me = identity.cluster_user
    job = await _recorded_job(view, services, request.job_id)
    if job is None:
        days = services.config.database.history_days
        return MoreAnswer(
            f"skybot no longer knows job {request.job_id}: it keeps ended jobs for {days} days."
        )
    if job.user != me:
        return MoreAnswer(
            f"Job {shown_label(job)} belongs to {literal(job.user)}, not to you ({literal(me)}): "
            "skybot shows a job's output only to its owner, so nothing was read."
        )
    if services.limiter is not None:
        wait = services.limiter.take((team_id, user_id), time.time())
        if wait > 0:
            return MoreAnswer(f"Slow down: try again in {math.ceil(wait)} s.")
    tail = await read_output(services, me, stream_path(job, request.stream), request.end, lines)
    part = earlier_chunk(request, tail, stderr_path(job) == stdout_path(job), lines)
    which = "Latest" if request.end == MAX_OFFSET else "Earlier"
    headline = f"{which} output of job {shown_label(job)} {literal(job.name)}:"
    text = f"{headline}\n{part.markdown}"
    more = more_block(view.cluster_name, job.job_id, [part])
    return MoreAnswer(text, [section(text), *more], refused=False)


async def _recorded_job(view: ClusterView, services: Services, job_id: int) -> Job | None:
    """The job as skybot last recorded it: its latest transition, else the live snapshot."""
    if services.writer is not None:
        cluster = rows_cluster(view, services.config)
        recorded = await services.writer.run(last_job_record, cluster, job_id)
        if recorded is not None:
            return recorded
    return next(
        (j for jobs in view.jobs_by_user.values() for j in jobs if j.job_id == job_id), None
    )


async def read_output(
    services: Services, user: str, path: str, end: int | None, lines: int
) -> OutputTail:
    """The last `lines` of `path` (before byte `end`), read by the runner as `user`, within
    the DMs' limits; a reason instead when it cannot be."""
    if not path.startswith("/"):
        return OutputTail(path, error="Slurm did not say which directory the job ran in")
    seconds = services.config.notifications.log_tail_seconds
    request = tail_request(path, lines, tail_bytes(lines), end)
    try:
        # The runner stops itself after its own 10 s; this bounds the wait for sudo too.
        reply = await asyncio.wait_for(services.runner(user, request), seconds * 2 + 1)
    except TimeoutError:
        return OutputTail(path, error=f"it could not be read within {seconds:g} s")
    return tail_from_reply(path, reply)


async def clicked(click: Click, view: ClusterView, services: Services) -> Answer:
    answer = await more_clicked(
        view, services, click.team_id, click.user_id, click.action_id, click.value
    )
    # One clicked under a private answer (`/sky log` in the DM) stays private too.
    return await _delivered(click, answer, services, private=click.ephemeral)


async def _delivered(
    click: Click, answer: MoreAnswer, services: Services, private: bool = False
) -> Answer:
    """The chunk as a new message where the button was, if that is the owner's DM with skybot;
    clicked anywhere else (a failure DM forwarded or shared into a channel), the chunk goes to
    the owner's DM and the channel gets nothing: job output is shown to its owner only."""
    if not answer.refused and not click.in_dm:
        if services.dm is not None:
            key = f"log-more:{click.team_id}:{click.user_id}:{click.action_id[:80]}:{time.time()}"
            await services.dm(key, click.user_id, answer.text, answer.blocks)
            answer = MoreAnswer(IN_YOUR_DM)
        else:
            answer = MoreAnswer("skybot shows job output only in your DM with it.")
    return Answer(
        answer.text,
        answer.blocks,
        replace_original=False,
        response_type="ephemeral" if answer.refused or private else "in_channel",
    )


BUTTON = Button(
    SHOW_MORE_LOG, clicked, lambda _: "skybot could not read that output just now; try again."
)
