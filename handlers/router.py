"""Turning `/sky …` text into a Reply: tokenising, choosing the subcommand, and the safety net.

Every input gets an answer. Unknown subcommands get a suggestion; a bug in a subcommand gets an
apology in Slack and a traceback in the log, never in the user's face.

Slack wants the ack within 3 s. Read-only commands answer from memory; anything that awaits
(an action, the runner, the store) runs under one deadline here: past ACK_DEADLINE_SECONDS the
ack says it is working on it and the answer goes out later through `late` (the command's
response_url, or a DM). Commands that start the runner also take a token from the asker's
rate-limit bucket first, given back if the command refuses the input (UsageError): so a
command must not raise UsageError once it has started the runner, but answer normally.
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import logging
import math
import re
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from core.chart_specs import ChartSpec
from core.slack_text import literal
from core.view import ClusterView
from handlers.clusters import ClusterDesks, UnknownCluster, actions_refusal
from handlers.reply import MAX_BLOCKS, Reply, context, simple
from handlers.request import ChartQueue
from handlers.request import CommandRequest as CommandRequest
from handlers.services import Services

log = logging.getLogger(__name__)


class UsageError(Exception):
    """Bad input: the message is shown to the user as it is."""


CommandFunction = Callable[[CommandRequest, ClusterView], Reply]
# Commands that change something (link, submit, …) get skybot's services and may await.
ActionFunction = Callable[[CommandRequest, Services], Awaitable[Reply]]
# Commands with a chart say which (`--chart`); the outbox draws and uploads it later.
ChartFunction = Callable[[CommandRequest, ClusterView], list[ChartSpec]]
# Delivers an answer that missed the ack (response_url or DM).
LateReply = Callable[[Reply], Awaitable[None]]

# Slack drops an ack after 3 s; this leaves room for the network and Bolt.
ACK_DEADLINE_SECONDS = 2.5
# Answers still being worked on after their ack; kept so the tasks are not collected.
_LATE: set[asyncio.Task[None]] = set()


@dataclass(frozen=True)
class Command:
    """A subcommand: `run` answers from the snapshot view; `act` does something."""

    name: str
    usage: str
    summary: str
    run: CommandFunction | None = None
    details: str = ""
    act: ActionFunction | None = None
    charts: ChartFunction | None = None
    # Runs skybot-runner (sudo, as the user): rate-limited per Slack user.
    starts_runner: bool = False
    # Answered only to the asker, whatever `--here` says: identity answers name an account
    # and carry its link code, and posted as the bot they would ask a named person to run it.
    private: bool = False
    # About one cluster's data or jobs (chosen by `--cluster` or a lab); False for what is the
    # same on every cluster (help, links, DM settings): the default cluster's, not named.
    about_cluster: bool = True


class CommandTable:
    def __init__(self) -> None:
        self._commands: dict[str, Command] = {}

    def add(self, command: Command) -> None:
        self._commands[command.name] = command

    def get(self, name: str) -> Command | None:
        return self._commands.get(name)

    def all(self) -> list[Command]:
        return list(self._commands.values())

    def charted(self) -> list[str]:
        return [c.name for c in self._commands.values() if c.charts is not None]

    def suggest(self, name: str) -> str | None:
        # difflib is quadratic: a pasted essay must not stall the event loop.
        close = difflib.get_close_matches(name[:40], self._commands, n=1, cutoff=0.6)
        return close[0] if close else None


@dataclass(frozen=True)
class Words:
    """The command text split into words, less the flags every command understands."""

    words: list[str]
    # `--here`: answer in the channel for everyone, not only to the asker.
    here: bool
    # `--chart`: also post the answer's chart.
    chart: bool
    # `--cluster NAME`: the cluster the command is about (None: chosen by its words).
    cluster: str | None = None


# Text without quotes or backslashes splits as shlex would split it, on shlex's whitespace:
# the common case skips shlex's character-by-character lexer, a third of a command's routing.
_NOTHING_QUOTED = re.compile(r"[^'\"\\]*")
_SHELL_SPACE = re.compile(r"[ \t\r\n]+")


def split_words(text: str) -> Words:
    if _NOTHING_QUOTED.fullmatch(text):
        words = [word for word in _SHELL_SPACE.split(text) if word]
    else:
        try:
            words = shlex.split(text)
        except ValueError as error:
            message = f"I could not read that command ({error}). Check your quotes."
            raise UsageError(message) from None
    cluster, words = _cluster_flag(words)
    return Words(
        [w for w in words if w not in ("--here", "--chart")],
        "--here" in words,
        "--chart" in words,
        cluster,
    )


def _cluster_flag(words: list[str]) -> tuple[str | None, list[str]]:
    """`--cluster NAME` or `--cluster=NAME` anywhere, taken out of the words."""
    for i, word in enumerate(words):
        if word.startswith("--cluster="):
            return word.partition("=")[2] or _no_cluster_name(), words[:i] + words[i + 1 :]
        if word == "--cluster":
            if i + 1 == len(words):
                _no_cluster_name()
            return words[i + 1], words[:i] + words[i + 2 :]
    return None, words


def _no_cluster_name() -> str:
    raise UsageError("`--cluster` needs a cluster's name: `--cluster NAME`.")


def _route(table: CommandTable, request: CommandRequest) -> tuple[Command, CommandRequest] | Reply:
    """The command `request.text` asks for and the request split into its words, or the
    reply to bad input."""
    try:
        split = split_words(request.text)
    except UsageError as error:
        return simple(str(error))
    words = split.words
    name = words[0].lower() if words else "help"
    command = table.get(name)
    if command is None:
        hint = table.suggest(name)
        maybe = f" Did you mean `/sky {hint}`?" if hint else ""
        return simple(f"{literal(name, 40)} is not a skybot command.{maybe} Try `/sky help`.")
    # As dataclasses.replace, without its walk over the fields on every ack.
    parsed = {
        "args": tuple(words[1:]),
        "here": split.here and not command.private,
        "chart": split.chart,
        "cluster": split.cluster or "",
    }
    return command, CommandRequest(**(request.__dict__ | parsed))


async def dispatch(
    table: CommandTable,
    request: CommandRequest,
    view: ClusterView,
    services: Services | None = None,
    *,
    late: LateReply | None = None,
    deadline: float = ACK_DEADLINE_SECONDS,
    desks: ClusterDesks | None = None,
) -> Reply:
    """Answer one `/sky` command; never raises. Read-only commands answer from the view;
    actions need `services` (whose chart queue and rate limiter, if any, serve `--chart` and
    the runner's commands). Without services (the console) only read-only commands answer,
    and nothing here awaits.

    With `late`, whatever awaits is given `deadline` seconds; past it the caller gets a
    "working on it" reply and `late` gets the answer once there is one.

    With `desks`, the request's cluster is chosen among them (handlers/clusters.py), and
    `view` and `services` are that cluster's; where there are several the answer names it.
    """
    routed = _route(table, request)
    if isinstance(routed, Reply):
        return routed
    command, request = routed
    if desks is not None:
        chosen = _on_cluster(desks, request, services, command.about_cluster)
        if isinstance(chosen, Reply):
            return chosen
        request, view, services = chosen
        if command.starts_runner and services is not None:
            cluster = services.config.default_cluster
            if not cluster.acts_through_runner:  # said now, not after a queue or a DM
                return simple(actions_refusal(cluster))
        if request.cluster:
            note = f"On cluster {literal(request.cluster)}."
            late = _noted(late, note) if late is not None else None
            named = _answer(table, command, request, view, services, late, deadline)
            return _with_note(await named, note)
    elif request.cluster:  # no clusters to choose from (the console, tests): its only one
        request = CommandRequest(**(request.__dict__ | {"cluster": ""}))
    return await _answer(table, command, request, view, services, late, deadline)


def _noted(late: LateReply, note: str) -> LateReply:
    """`late`, its answer ending with `note` as an answer in time would."""

    async def deliver(reply: Reply) -> None:
        await late(_with_note(reply, note))

    return deliver


def _on_cluster(
    desks: ClusterDesks, request: CommandRequest, services: Services | None, about: bool
) -> tuple[CommandRequest, ClusterView, Services | None] | Reply:
    """The request, view and services of the cluster the request is about (`about`: whether
    it is about one; if not, the default's, unnamed)."""
    try:
        desk = desks.chosen(request.cluster or None, request.args) if about else desks.default
    except UnknownCluster as error:
        return simple(str(error))
    named = desk.name if desks.several and about else ""
    request = CommandRequest(**(request.__dict__ | {"cluster": named}))
    # Without services (the console) only read-only commands answer, on any cluster.
    return request, desk.view(), (desk.services or services) if services is not None else None


async def _answer(
    table: CommandTable,
    command: Command,
    request: CommandRequest,
    view: ClusterView,
    services: Services | None,
    late: LateReply | None,
    deadline: float,
) -> Reply:
    if services is None:
        reply = _answer_from_view(command, request, view)
        return (
            _with_note(reply, "Charts are posted in Slack, not here.") if request.chart else reply
        )
    if request.chart:
        work = _answer_with_charts(table, command, request, view, services.queue_charts)
    elif command.act is None:
        return _answer_from_view(command, request, view)
    else:
        refund = None
        limiter = services.limiter
        if command.starts_runner and limiter is not None:
            key = (request.team_id, request.user_id)
            wait = limiter.take(key, request.now)
            if wait > 0:
                return simple(_slow_down(table, wait))
            refund = functools.partial(limiter.give_back, key)
        work = _act(command.act, request, services, refund)
    if late is None:
        return await work
    return await within(work, deadline, late, f"`/sky {command.name}`")


async def _act(
    act: ActionFunction,
    request: CommandRequest,
    services: Services,
    refund: Callable[[], None] | None,
) -> Reply:
    """The action's answer; a UsageError (bad input: nothing was started) refunds its token."""
    try:
        reply = await act(request, services)
    except UsageError as error:
        if refund is not None:
            refund()
        return _failure(request, error)
    except Exception as error:
        return _failure(request, error)
    return Reply(reply.text, reply.blocks, in_channel=request.here)


async def within(work: Awaitable[Reply], deadline: float, late: LateReply, what: str) -> Reply:
    """The answer if it is ready within `deadline` s, else "working on `what`" and `late` later."""
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline))
    if task in done:
        return task.result()

    async def deliver() -> None:
        reply = await task
        try:
            await late(reply)
        except Exception:
            log.exception("could not deliver the late answer to %s", what)

    follow_up = asyncio.create_task(deliver())
    _LATE.add(follow_up)
    follow_up.add_done_callback(_LATE.discard)
    return simple(f"⏳ Working on {what}; the answer will follow here in a moment.")


def _slow_down(table: CommandTable, wait: float) -> str:
    names = ", ".join(f"`/sky {c.name}`" for c in table.all() if c.starts_runner)
    return (
        f"Slow down: {names} act on the cluster as you, and you have used them a lot just now. "
        f"Try again in {math.ceil(wait)} s."
    )


def _answer_from_view(command: Command, request: CommandRequest, view: ClusterView) -> Reply:
    run = command.run
    if run is None:
        return simple(f"`/sky {command.name}` works in Slack, not here.")
    return _guarded(request, lambda: run(request, view))


async def _answer_with_charts(
    table: CommandTable,
    command: Command,
    request: CommandRequest,
    view: ClusterView,
    queue_charts: ChartQueue | None,
) -> Reply:
    """The usual answer, plus where its chart will appear once drawn."""
    charts = command.charts
    if charts is None:
        names = ", ".join(f"`/sky {name} --chart`" for name in table.charted())
        return simple(f"`/sky {command.name}` has no chart. Charts: {names}.")
    if queue_charts is None:
        return simple("This skybot draws no charts.")
    try:
        note = await queue_charts(request, charts(request, view))
    except Exception as error:
        return _failure(request, error)
    return _with_note(_answer_from_view(command, request, view), note)


def _with_note(reply: Reply, note: str) -> Reply:
    blocks = [*reply.blocks[: MAX_BLOCKS - 1], context(note)]
    return Reply(f"{reply.text}\n{note}", blocks, reply.in_channel)


def _guarded(request: CommandRequest, answer: Callable[[], Reply]) -> Reply:
    try:
        reply = answer()
    except Exception as error:
        return _failure(request, error)
    return Reply(reply.text, reply.blocks, in_channel=request.here)


def _failure(request: CommandRequest, error: Exception) -> Reply:
    if isinstance(error, UsageError):
        return simple(str(error))
    log.error(
        "command %r from %s/%s failed",
        request.text[:200],
        request.team_id,
        request.user_id,
        exc_info=error,
    )
    return simple(
        "Sorry, skybot hit an internal error answering that. "
        "The admins can find the details in skybot's log."
    )
