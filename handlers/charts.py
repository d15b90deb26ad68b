"""Queueing the charts `--chart` asks for: the outbox draws and uploads them after the ack.

A chart goes to the asker's DM with skybot, or with `--here` to the channel the command was
typed in. skybot must be a member there; if the channel refuses the chart, the outbox sends it
to the asker's DM with the reason (scheduler/outbox_sender.py). Asking again within the same
minute does not queue a second copy.
"""

from __future__ import annotations

from collections.abc import Callable

from core.chart_specs import LAB_GPUS, ChartSpec
from core.slack_text import literal
from handlers.request import CommandRequest
from store.outbox import OutboxMessage, enqueue
from store.writer import StoreWriter


class ChartRequests:
    """A handlers.request.ChartQueue that writes chart rows into the outbox."""

    def __init__(self, writer: StoreWriter, wake_sender: Callable[[], None]) -> None:
        self._writer = writer
        self._wake_sender = wake_sender

    async def __call__(self, request: CommandRequest, specs: list[ChartSpec]) -> str:
        in_channel = request.here and bool(request.channel_id)
        target = request.channel_id if in_channel else request.user_id
        minute = int(request.now // 60)
        messages = [
            OutboxMessage(
                key=(
                    f"chart:{request.team_id}:{request.user_id}:{target}:{spec.kind}:"
                    f"{spec.lab}:{minute}"
                ),
                target=target,
                text=chart_caption(
                    spec, f"<@{request.user_id}>" if in_channel else None, request.cluster
                ),
                chart=spec,
                refused_to=request.user_id if in_channel else "",
            )
            for spec in specs
        ]
        added = await self._writer.run(enqueue, messages, request.now)
        self._wake_sender()
        if not added:
            return "That chart is already on its way (one per minute)."
        noun = "chart" if added == 1 else f"{added} charts"
        if in_channel:
            return (
                f"Drawing the {noun}; it will appear in this channel in a few seconds "
                "(skybot must be a member: `/invite @skybot`; if not, it comes to your DM)."
            )
        return f"Drawing the {noun}; it will arrive in your DM with skybot in a few seconds."


def chart_caption(spec: ChartSpec, asked_by: str | None = None, cluster: str = "") -> str:
    """`cluster`: named where skybot serves several ("" where it serves one)."""
    days = round((spec.until - spec.since) / 86400)
    what = "GPUs in use against the cap" if spec.kind == LAB_GPUS else "largest directories"
    where = f" on {literal(cluster)}" if cluster else ""
    caption = f"*{literal(spec.lab)}*{where}: {what}, last {days} days"
    return f"{caption} (asked by {asked_by})" if asked_by else caption
