"""One `/sky` invocation as every handler sees it, the error that refuses bad input, and the
seam that queues its charts.

Below both the router and the services it hands to actions, so neither imports the other
for these types.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

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


# Queues the charts a request asked for and says where they will appear.
ChartQueue = Callable[[CommandRequest, list[ChartSpec]], Awaitable[str]]
