"""One `/sky` invocation as every handler sees it, and the seam that queues its charts.

Below both the router and the services it hands to actions, so neither imports the other
for these types.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from core.chart_specs import ChartSpec


@dataclass(frozen=True, kw_only=True)
class CommandRequest:
    """One `/sky` invocation, already split into words."""

    team_id: str
    user_id: str
    args: tuple[str, ...]
    here: bool = False
    # The asker's cluster account, when skybot knows it.
    cluster_user: str | None = None
    # When the command arrived (epoch seconds), for "as of 12 s ago".
    now: float = 0.0
    # `--chart`: also draw this answer's chart, and the channel the command was typed in.
    chart: bool = False
    channel_id: str = ""


# Queues the charts a request asked for and says where they will appear.
ChartQueue = Callable[[CommandRequest, list[ChartSpec]], Awaitable[str]]
