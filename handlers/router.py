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

import dataclasses
import difflib
import functools
import logging
import math
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

from core.chart_specs import ChartSpec
from core.slack_text import literal
from core.view import ClusterView
from handlers.clusters import ClusterDesks, UnknownCluster, actions_refusal
from handlers.command_words import split_words
from handlers.deadline import ACK_DEADLINE_SECONDS, LateReply, within
from handlers.kept_answers import kept_answer
from handlers.reply import MAX_BLOCKS, Reply, context, simple
from handlers.request import ChartQueue
from handlers.request import CommandRequest as CommandRequest
from handlers.request import UsageError as UsageError
from handlers.services import Services

log = logging.getLogger(__name__)


CommandFunction = Callable[[CommandRequest, ClusterView], Reply]
# Commands that change something (link, submit, …) get skybot's services and may await.
ActionFunction = Callable[[CommandRequest, Services], Awaitable[Reply]]
# Commands with a chart say which (`--chart`); the outbox draws and uploads it later.
ChartFunction = Callable[[CommandRequest, ClusterView], list[ChartSpec]]
# What about the asker a kept answer depends on, given the command's words and the asker's
# cluster account (Command.same_for).
SameFor = Callable[[tuple[str, ...], str | None], Hashable]


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
    # Only for a read-only command whose answer, less the freshness lines `answer()` stamps
    # on it, depends on nothing but the snapshot, its words and the asker's cluster account:
    # `same_for(args, cluster_user)` says what of the asker's it depends on (None: nothing).
    # Its answer is then worked out once per snapshot and kept; each ack only stamps it.
    same_for: SameFor | None = None


class CommandTable:
    def __init__(self) -> None:
        self._commands: dict[str, Command] = {}
        # Texts read before: the same few commands are typed over and over.
        self._read: dict[str, Routed | str] = {}

    def add(self, command: Command) -> None:
        self._commands[command.name] = command
        self._read.clear()

    def name_of(self, text: str) -> str:
        """The subcommand `text` asks for, or "unknown" (for bad input too): what metrics
        and logs may name, since a label must not take whatever anyone types."""
        routed = self.read(text)
        return routed.command.name if isinstance(routed, Routed) else "unknown"

    def read(self, text: str) -> Routed | str:
        """The command `text` names and the words it gives it, or what to answer bad input:
        worked out once per text (it depends on nothing else), bounded in count and length
        so that whatever anyone types cannot grow it."""
        routed = self._read.get(text)
        if routed is None:
            routed = _read(self, text)
            if len(text) <= MAX_TEXT_KEPT:
                if len(self._read) >= MAX_TEXTS_KEPT:
                    self._read.clear()
                self._read[text] = routed
        return routed

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


# CommandTable.read keeps this many texts, each at most this long.
MAX_TEXTS_KEPT = 1024
MAX_TEXT_KEPT = 200


@dataclass(frozen=True)
class Routed:
    """A command's text as read: the command it names, and the request's fields it sets."""

    command: Command
    args: tuple[str, ...]
    here: bool
    chart: bool
    # `--cluster NAME`'s name, or None.
    cluster: str | None


def _read(table: CommandTable, text: str) -> Routed | str:
    """The command `text` asks for and its words, or the answer to bad input."""
    try:
        split = split_words(text)
    except UsageError as error:
        return str(error)
    words = split.words
    name = words[0].lower() if words else "help"
    command = table.get(name)
    if command is None:
        hint = table.suggest(name)
        maybe = f" Did you mean `/sky {hint}`?" if hint else ""
        return f"{literal(name, 40)} is not a skybot command.{maybe} Try `/sky help`."
    here = split.here and not command.private
    return Routed(command, tuple(words[1:]), here, split.chart, split.cluster)


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
    routed = table.read(request.text)
    if isinstance(routed, str):
        return simple(routed)
    command = routed.command
    # No clusters to choose from (the console, tests): the request is about its only one.
    cluster = ""
    if desks is not None:
        chosen = _on_cluster(desks, routed, services)
        if isinstance(chosen, Reply):
            return chosen
        cluster, view, services = chosen
        if command.starts_runner and services is not None:
            where = view.cluster or services.config.default_cluster
            if not where.acts_through_runner:  # said now, not after a queue or a DM
                return simple(actions_refusal(where))
    note = f"On cluster {literal(cluster)}." if cluster else ""
    if command.same_for is not None and not routed.chart:  # read-only: kept, stamped per ack
        kept = _kept(command, command.same_for, request, routed, cluster, view)
        return _with_note(kept, note) if note else kept
    request = _with_words(request, routed, cluster)
    if note:
        late = _noted(late, note) if late is not None else None
        named = _answer(table, command, request, view, services, late, deadline)
        return _with_note(await named, note)
    return await _answer(table, command, request, view, services, late, deadline)


def _with_words(request: CommandRequest, routed: Routed, cluster: str) -> CommandRequest:
    """The request as the command sees it: its words read, its cluster chosen."""
    return dataclasses.replace(
        request, args=routed.args, here=routed.here, chart=routed.chart, cluster=cluster
    )


def _kept(
    command: Command,
    same_for: SameFor,
    request: CommandRequest,
    routed: Routed,
    cluster: str,
    view: ClusterView,
) -> Reply:
    """The answer of a command that depends on nothing but the snapshot, its words and what
    `same_for` says of the asker: worked out once per snapshot and kept in the view
    (handlers/kept_answers.py), then stamped for each ack."""
    key = command.name, routed.args, same_for(routed.args, request.cluster_user)
    return kept_answer(
        key,
        view,
        request.now,
        routed.here,
        lambda: _answer_from_view(command, _with_words(request, routed, cluster), view),
    )


def _noted(late: LateReply, note: str) -> LateReply:
    """`late`, its answer ending with `note` as an answer in time would."""

    async def deliver(reply: Reply) -> None:
        await late(_with_note(reply, note))

    return deliver


def _on_cluster(
    desks: ClusterDesks, routed: Routed, services: Services | None
) -> tuple[str, ClusterView, Services | None] | Reply:
    """The name (where skybot serves several), view and services of the cluster the command
    is about; one not about a cluster gets the default's, unnamed."""
    about = routed.command.about_cluster
    try:
        desk = desks.chosen(routed.cluster, routed.args) if about else desks.default
    except UnknownCluster as error:
        return simple(str(error))
    named = desk.name if desks.several and about else ""
    # Without services (the console) only read-only commands answer, on any cluster.
    return named, desk.view(), (desk.services or services) if services is not None else None


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
    return dataclasses.replace(reply, in_channel=request.here, fresh=None)


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
    return Reply(f"{reply.text}\n{note}", blocks, reply.in_channel, modal=reply.modal)


def _guarded(request: CommandRequest, answer: Callable[[], Reply]) -> Reply:
    try:
        reply = answer()
    except Exception as error:
        return _failure(request, error)
    return Reply(reply.text, reply.blocks, request.here, reply.fresh)


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
