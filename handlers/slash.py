"""The `/sky` slash command listener: Slack's edge into the one `dispatch`.

Read-only answers are computed from the in-memory snapshot and sent in the ack itself: with
the app in `process_before_response` mode that is one HTTP response (or one Socket Mode ack)
well inside Slack's 3 seconds, and nothing on that path waits for Slurm or the database.
Everything after receipt (who asked, then the answer) runs under one deadline; an answer that
misses it is acked as "working on it" and follows by response_url.

Each command is logged at DEBUG (who asked what, how fast) and counted by subcommand in the
metrics, not logged at INFO: a line per command costs about as much as the answer itself.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest

from handlers.click_answers import answer_later
from handlers.clusters import ClusterDesks, single_desk
from handlers.commands import command_table
from handlers.deadline import (
    ACK_DEADLINE_SECONDS,
    SLACK_CALL_DEADLINE_SECONDS,
    LateReply,
    within,
)
from handlers.job_form import open_form
from handlers.reply import Reply, simple
from handlers.request import CommandRequest
from handlers.router import CommandTable, UsageError, dispatch
from handlers.services import Services
from handlers.slack_input import decode_command_text
from store.reader import SnapshotCache

log = logging.getLogger(__name__)

# (subcommand, seconds): one answered command, for the metrics.
ObserveCommand = Callable[[str, float], None]


def register_listeners(
    app: AsyncApp,
    cache: SnapshotCache,
    services: Services,
    table: CommandTable | None = None,
    observe: ObserveCommand | None = None,
    desks: ClusterDesks | None = None,
) -> None:
    """`desks`: every cluster the bot serves (by default `cache`'s and `services`' one)."""
    commands = table or command_table(services.config.template)
    clusters = desks or single_desk(services.config, cache.current, services)

    # One argument, as the smallest Bolt listener takes: Bolt matches each of the arguments
    # it offers against the listener's names on every call.
    @app.command("/sky")
    async def sky(request: AsyncBoltRequest) -> None:
        started = time.perf_counter()
        command, context = request.body, request.context
        asked = request_of(command, services)
        if isinstance(asked, Reply):
            await context.ack(**asked.for_slack())
            return
        name = _metric_name(commands, asked.text)
        late = _late_answer(command, context, services, name)
        if asked.cluster_user is not None:  # known from memory: only the command may await
            # One budget from receipt, as for one resolved first (_resolve_then_answer).
            budget = ACK_DEADLINE_SECONDS - (time.perf_counter() - started)
            view = clusters.default.view()
            reply = await dispatch(
                commands, asked, view, services, late=late, deadline=budget, desks=clusters
            )
        else:
            reply = await _resolve_then_answer(commands, asked, clusters, services, late, started)
        ack = reply.for_slack()
        if reply.modal is not None:  # the job form, opened with this command's trigger
            left = await open_form(context.client, str(command.get("trigger_id", "")), reply)
            ack = {} if left is None else left.for_slack()
        await context.ack(**ack)
        seconds = time.perf_counter() - started
        if observe is not None:
            observe(name, seconds)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "/sky %r from %s/%s (%s) answered in %.1f ms",
                asked.text[:200],
                asked.team_id,
                asked.user_id,
                asked.cluster_user,
                seconds * 1000,
            )


def request_of(command: dict[str, Any], services: Services) -> CommandRequest | Reply:
    """The request Slack's payload carries, the asker's account as far as memory knows it;
    or the refusal of a mention of someone skybot does not know."""
    team_id = command.get("team_id", "")
    user_id = command.get("user_id", "")
    text = command.get("text", "")
    # Slack's escapes all start with `<` or `&` (handlers/slack_input.py): most commands have
    # none, and need no decoding.
    if "<" in text or "&" in text:
        try:
            mentioned = functools.partial(services.identity.cluster_user, team_id)
            text = decode_command_text(text, mentioned)
        except UsageError as refusal:
            return simple(str(refusal))
    return CommandRequest(
        team_id=team_id,
        user_id=user_id,
        text=text,
        cluster_user=services.identity.cluster_user(team_id, user_id),
        channel_id=command.get("channel_id", ""),
    )


async def _resolve_then_answer(
    commands: CommandTable,
    request: CommandRequest,
    desks: ClusterDesks,
    services: Services,
    late: LateReply,
    started: float,
) -> Reply:
    """The answer to someone memory does not know. Resolving who asked (users.info with the
    SDK's retries, a database write) is Slack's call, and is given SLACK_CALL_DEADLINE_SECONDS
    from receipt: past that the ack says "working on it" (within 1 s whatever Slack's API
    does) and the answer follows. Resolved in time, the command has what is left of the
    ack's budget, as one known from memory has."""
    resolving = asyncio.ensure_future(_resolved(request, services))
    wait = SLACK_CALL_DEADLINE_SECONDS - (time.perf_counter() - started)
    done, _ = await asyncio.wait({resolving}, timeout=max(0.0, wait))
    if resolving in done:
        budget = ACK_DEADLINE_SECONDS - (time.perf_counter() - started)
        view = desks.default.view()
        resolved = resolving.result()
        return await dispatch(
            commands, resolved, view, services, late=late, deadline=budget, desks=desks
        )

    async def resolve_then_answer() -> Reply:
        resolved = await resolving
        return await dispatch(commands, resolved, desks.default.view(), services, desks=desks)

    name = _metric_name(commands, request.text)
    what = f"`/sky {name}`" if name != "unknown" else "that"
    return await within(resolve_then_answer(), 0.0, late, what)


async def _resolved(request: CommandRequest, services: Services) -> CommandRequest:
    """The request with its asker's cluster account, as the identity rules find it now."""
    try:
        cluster_user = await services.identity.resolve(request.team_id, request.user_id)
    except Exception:
        log.exception(
            "resolving %s/%s to a cluster account failed", request.team_id, request.user_id
        )
        cluster_user = None
    return replace(request, cluster_user=cluster_user)


def _late_answer(
    command: dict[str, Any], context: AsyncBoltContext, services: Services, name: str
) -> LateReply:
    """Where an answer to subcommand `name` that missed the ack goes: the response_url, else
    a DM. (Made for every command, used by few: nothing is worked out until it is, not even
    Bolt's respond and client.)"""
    user_id = command.get("user_id", "")

    async def late(reply: Reply) -> None:
        respond = context.respond  # Bolt's, for the command's response_url
        if command.get("response_url") and respond is not None:
            await answer_later(
                respond,
                reply.for_slack(),
                user_id=user_id,
                dm=services.dm,
                what=f"the late answer to {name!r} from {user_id}",
            )
        else:
            await context.client.chat_postMessage(
                channel=user_id, text=reply.text, blocks=reply.blocks
            )

    return late


def _metric_name(commands: CommandTable, text: str) -> str:
    """The subcommand the metrics count `text` under (the router's reading of it, kept)."""
    return commands.name_of(text)
