"""One `/sky` invocation as every handler sees it, the error that refuses bad input, and the
seam that queues its charts.

Below both the router and the services it hands to actions, so neither imports the other
for these types.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import MISSING, dataclass, field, fields

from core.chart_specs import ChartSpec


class UsageError(Exception):
    """Bad input: the message is shown to the user as it is."""


@dataclass(frozen=True, kw_only=True)
class CommandRequest:
    """One `/sky` invocation. An edge (the Slack listener, the console) fills in who asked
    and what they typed; the router splits `text` into `args` and the flags every command
    understands (`--here`, `--chart`, `--cluster NAME`) before a command sees it."""

    team_id: str
    user_id: str
    # What followed `/sky`, with Slack's mention markup already decoded.
    text: str = ""
    args: tuple[str, ...] = ()
    here: bool = False
    # The asker's cluster account, when skybot knows it.
    cluster_user: str | None = None
    # When the command arrived (epoch seconds), for "as of 12 s ago".
    now: float = field(default_factory=time.time)
    # `--chart`: also draw this answer's chart, and the channel the command was typed in.
    chart: bool = False
    channel_id: str = ""
    # The cluster this request is about: what `--cluster` said until the router has chosen,
    # then the chosen cluster's name where skybot serves several ("" where it serves one, so
    # answers read as they always have). Buttons do not read it: they name the cluster of the
    # view they are built from.
    cluster: str = ""


# Every field in order, defaults in place; the three without a default filled in per request.
_AS_DEFAULTS = {f.name: None if f.default is MISSING else f.default for f in fields(CommandRequest)}


def incoming_request(
    team_id: str, user_id: str, text: str, cluster_user: str | None, channel_id: str
) -> CommandRequest:
    """CommandRequest(team_id=…, user_id=…, text=…, cluster_user=…, channel_id=…), the
    same request (its fields in the same order), made on every ack without a frozen
    dataclass's __init__: that sets each of its eleven fields through object.__setattr__,
    about 2 µs, as much as the rest of the listener's own work (issue 32)."""
    request = object.__new__(CommandRequest)
    request.__dict__.update(
        _AS_DEFAULTS,
        team_id=team_id,
        user_id=user_id,
        text=text,
        cluster_user=cluster_user,
        channel_id=channel_id,
        now=time.time(),
    )
    return request


# Queues the charts a request asked for and says where they will appear.
ChartQueue = Callable[[CommandRequest, list[ChartSpec]], Awaitable[str]]
