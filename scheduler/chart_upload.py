"""Sending a queued chart: drawn when it is sent (scheduler/chart_maker.py), then uploaded
with the message as its comment."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from slack_sdk.web.async_client import AsyncWebClient

from core.chart_specs import ChartFile, ChartSpec
from store.outbox import QueuedMessage

# Draws a chart row's picture (scheduler/chart_maker.py); ChartUnavailable if it never can.
ChartRenderer = Callable[[ChartSpec], Awaitable[ChartFile]]


class ChartUnavailable(Exception):
    """The chart cannot be drawn (its lab is gone from the config, charts are off): park it."""


async def upload_chart(
    client: AsyncWebClient, charts: ChartRenderer | None, message: QueuedMessage, spec: ChartSpec
) -> tuple[str, str]:
    """Draw the chart now and upload it (files_upload_v2); the channel it went to, and no ts."""
    if charts is None:
        raise ChartUnavailable("this skybot draws no charts")
    chart = await charts(spec)
    channel = message.target
    if channel[:1] in ("U", "W"):
        # Unlike chat.postMessage, file sharing needs the DM's own channel id.
        opened = await client.conversations_open(users=channel)
        channel = str(opened["channel"]["id"])
    await client.files_upload_v2(
        channel=channel,
        file=chart.png,
        filename=chart.filename,
        title=chart.title,
        alt_txt=chart.alt_text,
        initial_comment=message.text,
    )
    return channel, ""
