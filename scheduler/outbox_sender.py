"""Delivering the outbox to Slack: at the pace Slack allows, without losing or repeating.

One worker sends queued messages oldest first with chat.postMessage (a user id as the channel
lands in the app's DM with that user). It is woken when something is enqueued and on a timer.

- Slack's 429 answers are first retried inside slack_sdk, after Retry-After; if the storm
  outlasts that, the message waits in the outbox until Retry-After has passed. Meanwhile no
  call to that method goes out at all, and every method keeps its tier's pace
  (scheduler/slack_limits.py, in the client).
- 5xx answers and network errors are retried with exponential back-off (at most a minute
  apart), for as long as it takes: nothing is dropped because Slack was down. When the Slack
  connection comes back (`link_restored()`), everything waiting is tried at once.
- Errors about the token rather than the message (`account_inactive`, `invalid_auth`, …)
  pause the whole sender: no message is touched, and `auth.test` is tried, less and less
  often, until Slack accepts the token again; then sending resumes by itself.
- Errors that can never succeed (the user or channel is gone, the bot is not in the channel,
  the blocks are invalid, …) park the message with the error instead of retrying forever.
- At most `per_channel_per_second` messages per channel (Slack's own limit is about one).
- A message is marked sent only after Slack accepted it, and only queued messages are sent.

Each channel's messages go out in the order they were enqueued: while the oldest waits out a
back-off, the newer ones wait behind it (other channels are not held up).

chat.postMessage has no idempotency key. So a DM is marked `sending_since` before the call
and carries its outbox id in its metadata; when the attempt's outcome was never learned (skybot
died before Slack's answer or before recording it, or the answer was lost), the DM's history is
read before it goes out again (scheduler/outbox_recheck.py), and a copy found there settles it.
Nothing marked sent is ever sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from scheduler.backoff import Backoff
from scheduler.chart_upload import ChartRenderer, ChartUnavailable, upload_chart
from scheduler.outbox_policy import (
    MAX_ATTEMPTS_UNKNOWN_ERROR,
    PERMANENT_ERRORS,
    TOKEN_ERRORS,
    SenderPacing,
    redirect_target,
    retry_after,
    send_outcome,
    to_whoever_asked,
)
from scheduler.outbox_recheck import already_delivered, outbox_metadata
from store.health import log_failure
from store.outbox import (
    QueuedMessage,
    claim_next_due,
    mark_sent,
    park,
    park_and_redirect,
    reschedule,
    retry_queued_now,
    shift_retries,
)
from store.writer import StoreWriter

log = logging.getLogger(__name__)

# (outcome): one attempt's result, for the metrics: "ok", "ratelimited", Slack's error code,
# "http_5xx", "network_error" or "chart_unavailable".
ObserveSend = Callable[[str], None]
# Network failures are worth retrying, however they surface.
_NETWORK_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


@dataclass(frozen=True)
class SenderPause:
    """Why the sender is paused (Slack's error code for the token) and since when."""

    error: str
    since: float


@dataclass
class SendReport:
    """What one pass over the outbox did."""

    sent: int = 0
    retried: int = 0
    parked: int = 0
    # When the next queued message becomes due (None: nothing queued).
    next_due: float | None = None


class OutboxSender:
    """Sends queued outbox rows; `wake()` after enqueueing, `run(stop)` as a background task."""

    def __init__(
        self,
        writer: StoreWriter,
        client: AsyncWebClient,
        pacing: SenderPacing | None = None,
        *,
        clock: Callable[[], float] = time.time,
        charts: ChartRenderer | None = None,
        observe: ObserveSend | None = None,
    ) -> None:
        pacing = pacing or SenderPacing()
        self._writer = writer
        self._client = client
        self._charts = charts
        self._pacing = pacing
        self._interval = 1.0 / pacing.per_channel_per_second
        self._clock = clock
        self._observe = observe
        self._wake = asyncio.Event()
        # When the pass in progress began (monotonic); None between passes (the watchdog).
        self.pass_since: float | None = None
        self._probe_now = asyncio.Event()
        self._retry_all = False
        self._stop: asyncio.Event | None = None
        # Earliest time the next message may go to each target (the per-channel pace).
        self._free_at: dict[str, float] = {}
        self._pause: SenderPause | None = None
        self._probes = Backoff(pacing.token_probe_seconds, pacing.token_probe_max_seconds)
        # How far the wall clock jumped since the queued retries were last shifted by it.
        self._clock_moved = 0.0
        # Passes over the outbox finished so far: a test waits for the next one.
        self.passes = 0

    @property
    def paused(self) -> SenderPause | None:
        """Set while Slack refuses the bot token; None while sending."""
        return self._pause

    def wake(self) -> None:
        """Something was enqueued: look at the outbox now rather than at the next tick."""
        self._wake.set()

    def link_restored(self) -> None:
        """The connection to Slack is back: whatever waits on a retry is tried now, and a
        paused sender checks the token at once."""
        self._retry_all = True
        self._probe_now.set()
        self._wake.set()

    def clock_stepped(self, moved: float) -> None:
        """The wall clock jumped by `moved` seconds. Stepped back, every wait measured on it
        (retries, the per-channel pace, the token probe) keeps what it had left, instead of
        lasting as long as the step. Stepped forward, what waited is due early, which costs
        one early attempt at most; shifting it would also delay what was queued since."""
        self._wake.set()
        if moved >= 0:
            return
        self._clock_moved += moved
        self._free_at = {target: at + moved for target, at in self._free_at.items()}
        self._probes.retry_at += moved
        if self._pause is not None:
            self._pause = SenderPause(self._pause.error, self._pause.since + moved)
            self._probe_now.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until `stop` is set; a database or programming error is logged, not fatal."""
        self._stop = stop
        while not stop.is_set():
            if self._pause is not None:
                if self._probe_now.is_set() or not self._probes.should_skip(self._clock()):
                    self._probe_now.clear()
                    await self._probe_token()
                if self._pause is not None:
                    wait = max(0.0, self._probes.retry_at - self._clock())
                    await _wait_any(stop, self._probe_now, wait)
                    continue
            self._wake.clear()
            self.pass_since = time.monotonic()
            try:
                if self._clock_moved:
                    moved, self._clock_moved = self._clock_moved, 0.0
                    await self._writer.run(shift_retries, self._clock(), moved)
                if self._retry_all:
                    self._retry_all = False
                    await self._writer.run(retry_queued_now, self._clock())
                report = await self.send_due()
                self.passes += 1
                wait = self._pacing.idle_seconds
                if report.next_due is not None:
                    wait = min(wait, max(0.0, report.next_due - self._clock()))
            except Exception:
                log_failure(
                    log,
                    "outbox sender pass failed; trying again in %.0f s",
                    self._pacing.idle_seconds,
                )
                wait = self._pacing.idle_seconds
            self.pass_since = None
            if self._pause is None:
                await _wait_any(stop, self._wake, wait)

    async def _probe_token(self) -> None:
        """One auth.test while paused: resume if Slack accepts the token, else back off."""
        try:
            await self._client.auth_test()
        except (SlackApiError, *_NETWORK_ERRORS):
            self._probes.failed(self._clock())
            return
        assert self._pause is not None
        log.info(
            "Slack accepts the bot token again after %.0f s (%s): sending resumed",
            self._clock() - self._pause.since,
            self._pause.error,
        )
        self._pause = None
        self._probes.succeeded()

    def _pause_for(self, code: str) -> None:
        if self._pause is not None:
            return
        self._pause = SenderPause(code, self._clock())
        # The first probe waits a full interval: the call that paused us just failed.
        delay = self._probes.failed(self._clock())
        log.error(
            "Slack refuses the bot token (%s): the outbox is paused, nothing is dropped; "
            "checking the token again in %.0f s and less often after that (at most %.0f s "
            "apart). A new token means a new SLACK_BOT_TOKEN and a restart.",
            code,
            delay,
            self._probes.max_seconds,
        )

    async def send_due(self) -> SendReport:
        """Send everything due now (each channel at its pace), then report what is left.

        Each message is claimed in one writer call (store/outbox.py `claim_next_due`) and its
        outcome recorded in one more. A message that fails is not tried again within the same
        call, and its channel's later messages wait behind it.
        """
        report = SendReport()
        failed_targets: set[str] = set()
        while True:
            if self._stop is not None and self._stop.is_set():
                return report  # shutting down: the rest stays queued
            if self._pause is not None:
                return report  # Slack refuses the token: the rest stays queued
            claim = await self._writer.run(
                claim_next_due, self._clock(), dict(self._free_at), frozenset(failed_targets)
            )
            if claim.message is None:
                report.next_due = claim.next_due
                return report
            if not await self._send(claim.message, report):
                failed_targets.add(claim.message.target)

    async def _send(self, message: QueuedMessage, report: SendReport) -> bool:
        """One attempt; True if Slack accepted the message."""
        started = self._clock()
        self._free_at[message.target] = started + self._interval
        try:
            if message.chart is None:
                found = await already_delivered(self._client, message)
                channel, ts = found if found is not None else await self._post(message)
            else:
                channel, ts = await upload_chart(self._client, self._charts, message, message.chart)
        except SlackApiError as error:
            await self._failed(message, error, report)
            return False
        except _NETWORK_ERRORS as error:
            self._observed("network_error")
            await self._retry_later(
                message,
                f"network: {error!r}",
                report,
                self._pacing.connection_retry_max_seconds,
                unsure=True,
            )
            return False
        except ChartUnavailable as error:
            self._observed("chart_unavailable")
            await self._writer.run(park, message.id, f"chart: {error}")
            report.parked += 1
            log.warning("outbox %s parked: chart unavailable: %s", message.key, error)
            return False
        self._observed("ok")
        await self._writer.run(mark_sent, message.id, self._clock(), channel, ts)
        report.sent += 1
        return True

    def _observed(self, outcome: str) -> None:
        if self._observe is not None:
            self._observe(outcome)

    async def _post(self, message: QueuedMessage) -> tuple[str, str]:
        # A DM was marked sending when it was claimed: until Slack's answer is recorded,
        # whether it was delivered is unknown.
        response = await self._client.chat_postMessage(
            channel=message.target,
            text=message.text,
            blocks=message.blocks,
            unfurl_links=False,
            unfurl_media=False,
            metadata=outbox_metadata(message),
        )
        return str(response.get("channel") or ""), str(response.get("ts") or "")

    async def _failed(
        self, message: QueuedMessage, error: SlackApiError, report: SendReport
    ) -> None:
        status = error.response.status_code
        code = str(error.response.get("error") or f"http_{status}")
        self._observed(send_outcome(status, code))
        if status == 429:
            wait = retry_after(error.response.headers)
            until = self._clock() + wait
            # Slack's limit is per channel: hold this channel's queue, not just this message.
            self._free_at[message.target] = max(self._free_at.get(message.target, 0.0), until)
            await self._writer.run(reschedule, message.id, until, f"ratelimited ({wait} s)")
            report.retried += 1
            log.info("outbox %s: rate limited, retrying in %d s", message.key, wait)
        elif status >= 500:
            await self._retry_later(
                message,
                f"http {status}: {code}",
                report,
                self._pacing.connection_retry_max_seconds,
                unsure=True,
            )
        elif code in TOKEN_ERRORS:
            # Not this message's fault: it stays as it is, and so does everything else.
            self._pause_for(code)
        elif code in PERMANENT_ERRORS and redirect_target(message):
            redirect = to_whoever_asked(message, code)
            await self._writer.run(park_and_redirect, message.id, code, redirect, self._clock())
            report.parked += 1
            log.warning(
                "outbox %s to %s parked (%s); sent to %s instead",
                message.key,
                message.target,
                code,
                message.refused_to,
            )
        elif code in PERMANENT_ERRORS:
            await self._writer.run(park, message.id, code)
            report.parked += 1
            log.warning("outbox %s to %s parked: %s", message.key, message.target, code)
        elif message.attempts + 1 >= MAX_ATTEMPTS_UNKNOWN_ERROR:
            await self._writer.run(park, message.id, f"{code} (gave up after retries)")
            report.parked += 1
            log.error("outbox %s parked after repeated %s", message.key, code)
        else:
            log.warning("outbox %s to %s: Slack said %s", message.key, message.target, code)
            await self._retry_later(message, code, report)

    async def _retry_later(
        self,
        message: QueuedMessage,
        error: str,
        report: SendReport,
        max_delay: float | None = None,
        *,
        unsure: bool = False,
    ) -> None:
        """`unsure`: Slack may have the message (no answer, or a 5xx): ask before resending."""
        cap = (
            self._pacing.retry_max_seconds
            if max_delay is None
            else min(max_delay, self._pacing.retry_max_seconds)
        )
        delay = min(cap, self._pacing.retry_base_seconds * 2**message.attempts)
        at = self._clock() + delay
        await self._writer.run(reschedule, message.id, at, error, maybe_delivered=unsure)
        report.retried += 1
        log.info("outbox %s: %s; retrying in %.0f s", message.key, error, delay)


async def _wait_any(stop: asyncio.Event, wake: asyncio.Event, timeout: float) -> None:
    waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wake.wait())]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        for waiter in waiters:
            with contextlib.suppress(asyncio.CancelledError):
                await waiter
