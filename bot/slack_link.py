"""The Socket Mode connection to Slack, kept up in the background.

Connecting never holds up start-up or shutdown: while Slack is unreachable the bot still polls
Slurm and queues what it has to say, and SIGTERM still ends it. slack_sdk's client reconnects
by itself; this watches its public `is_connected()` once a second, so readiness and the
metrics know the state, and the outbox is told as soon as the connection is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp

log = logging.getLogger(__name__)
# slack_sdk's Socket Mode client logs through this one (see socket_mode_handler).
sdk_log = logging.getLogger(f"{__name__}.sdk")

WATCH_SECONDS = 1.0
CLOSE_SECONDS = 5.0
# How often slack_sdk's client checks its connection, and pings. A link cut without a close
# frame (a network or load balancer dropping it) is found only by that check: at Bolt's
# default of 10 s, commands went unanswered for up to 10 s (5.8 s was seen). At 3 s it is
# found within 3 s; the price is a ping every 3 s, and a pong later than half of it (aiohttp's
# heartbeat) counting as a dead link, which costs one reconnect.
PING_SECONDS = 3.0


class _OneLineRetries(logging.Filter):
    """slack_sdk logs every failed connection attempt as an ERROR with a full traceback, every
    few seconds for as long as Slack is unreachable. The state change is ours to report (once);
    each retry stays visible, as one warning line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.getMessage().startswith("Failed to connect"):
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


sdk_log.addFilter(_OneLineRetries())


def socket_mode_handler(app: AsyncApp, app_token: str) -> AsyncSocketModeHandler:
    # Bolt's Socket Mode adapter asks `logger.level <= DEBUG`, not isEnabledFor(DEBUG), before
    # timing each ack for a debug line: a logger left at NOTSET (0) passes, so every ack made
    # that line for nothing (about 1,500 instructions, issue 32). Pinned to what it inherits
    # now, after the log set-up: DEBUG under --verbose, so the line is still there then.
    sdk_log.setLevel(sdk_log.getEffectiveLevel())
    return AsyncSocketModeHandler(app, app_token, logger=sdk_log, ping_interval=PING_SECONDS)


class SocketModeLink:
    """`run(stop)` connects and watches; `connected` and `since` say how it is and since when."""

    def __init__(
        self,
        handler: AsyncSocketModeHandler,
        on_connected: Callable[[], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._handler = handler
        self._on_connected = on_connected
        self._clock = clock
        self.connected = False
        self.since = clock()
        self.ever_connected = False

    async def run(self, stop: asyncio.Event) -> None:
        log.info("connecting to Slack over Socket Mode")
        connecting = asyncio.create_task(self._handler.connect_async(), name="slack-connect")
        try:
            while not stop.is_set():
                self._observe(await self._handler.client.is_connected())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), WATCH_SECONDS)
        finally:
            connecting.cancel()
            await asyncio.gather(connecting, return_exceptions=True)
            try:
                await asyncio.wait_for(self._handler.close_async(), CLOSE_SECONDS)
            except Exception as error:  # shutting down: say so, but stop anyway
                log.warning("closing the Socket Mode connection failed: %r", error)

    def _observe(self, connected: bool) -> None:
        if connected == self.connected:
            return
        now = self._clock()
        if connected and not self.ever_connected:
            log.info("connected to Slack over Socket Mode")
        elif connected:
            log.info("reconnected to Slack over Socket Mode after %.0f s", now - self.since)
        else:
            log.warning("lost the Socket Mode connection to Slack; reconnecting")
        self.connected = connected
        self.since = now
        if connected:
            self.ever_connected = True
            self._on_connected()
