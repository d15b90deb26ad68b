"""Slack's rate limits, kept for every Web API call skybot makes: each method paced within its
documented tier, and a method Slack answered 429 not called again until its Retry-After has
passed, by any client that shares these limits (Slack counts per method, per app, per
workspace, and tightens its limits for an app that keeps calling while limited).

Two places, both slack_sdk's public API: `LimitedClient.api_call` (every method call goes
through it) waits for the method's turn before the first attempt, and `RetryAfter`, a retry
handler, holds the method for Retry-After on each 429 and waits that long before the SDK's
own retry. Waits are on the event loop's clock, which is monotonic.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from scheduler.outbox_policy import retry_after

log = logging.getLogger(__name__)

# Calls per minute by Slack's tiers (docs.slack.dev/apis/web-api/rate-limits: Tier 2 "20+",
# Tier 3 "50+", Tier 4 "100+"), for the methods skybot calls in numbers. chat.postMessage is
# of the special tier: one message a second per channel (the outbox sender's own pace) and
# "several hundred messages per minute" across the workspace, of which 200 are taken here
# (`notifications.messages_per_minute`).
TIER_2, TIER_3, TIER_4 = 20, 50, 100
POST_MESSAGE_PER_MINUTE = 200
PER_MINUTE = {
    "chat.postMessage": POST_MESSAGE_PER_MINUTE,
    "chat.postEphemeral": POST_MESSAGE_PER_MINUTE,
    "conversations.history": TIER_3,
    "conversations.open": TIER_3,
    "files.getUploadURLExternal": TIER_4,
    "files.completeUploadExternal": TIER_4,
    "users.info": TIER_4,
    "views.publish": TIER_4,
}
# Of a minute's quota, how many may go at once: bursts are tolerated, and a burst plus the
# steady pace after it still keeps to the quota in any 60 s.
BURST_SHARE = 0.1


@dataclass
class _Bucket:
    capacity: float
    per_second: float
    tokens: float
    updated: float


class SlackLimits:
    """Per Web API method: its pace (a token bucket within its tier) and Slack's Retry-After.
    One per bot token: every client of that token shares it."""

    def __init__(self, per_minute: dict[str, int] | None = None, messages_per_minute: int = 0):
        """`messages_per_minute`, if set, replaces chat.postMessage's workspace-wide pace
        (`notifications.messages_per_minute`)."""
        self._per_minute = dict(PER_MINUTE if per_minute is None else per_minute)
        if messages_per_minute:
            self._per_minute["chat.postMessage"] = messages_per_minute
        self._buckets: dict[str, _Bucket] = {}
        # Per method, the loop time before which Slack asked not to be called.
        self._held_until: dict[str, float] = {}

    def hold(self, method: str, seconds: float) -> None:
        """Slack answered 429 with Retry-After `seconds`: no call to `method` until then."""
        until = _now() + seconds
        if until > self._held_until.get(method, 0.0):
            self._held_until[method] = until
            log.info("Slack rate-limits %s: not called for %.0f s", method, seconds)

    def held_for(self, method: str) -> float:
        """Seconds until `method` may be called again after a 429 (0: now)."""
        return max(0.0, self._held_until.get(method, 0.0) - _now())

    async def turn(self, method: str) -> None:
        """Wait until `method` may be called: its Retry-After passed, and its pace allows."""
        while (wait := self.held_for(method)) > 0:
            await asyncio.sleep(wait)
        while (wait := self._take(method)) > 0:
            await asyncio.sleep(wait)
            while (held := self.held_for(method)) > 0:
                await asyncio.sleep(held)

    def _take(self, method: str) -> float:
        per_minute = self._per_minute.get(method)
        if per_minute is None:
            return 0.0
        now = _now()
        bucket = self._buckets.get(method)
        if bucket is None:
            capacity = max(1.0, float(int(per_minute * BURST_SHARE)))
            per_second = max(1.0, per_minute - capacity) / 60.0
            bucket = self._buckets[method] = _Bucket(capacity, per_second, capacity, now)
        bucket.tokens = min(
            bucket.capacity, bucket.tokens + (now - bucket.updated) * bucket.per_second
        )
        bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / bucket.per_second


class LimitedClient(AsyncWebClient):
    """An AsyncWebClient whose every call waits for its method's turn (`SlackLimits`)."""

    def __init__(self, *, limits: SlackLimits, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.limits = limits

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        await self.limits.turn(api_method)
        return await super().api_call(api_method, **kwargs)


class RetryAfter(AsyncRetryHandler):
    """Retries a 429 after Slack's Retry-After (and every 429 holds its method that long,
    retried here or not), as slack_sdk's own handler would if it also told the others."""

    def __init__(self, limits: SlackLimits, max_retry_count: int = 1) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self._limits = limits

    async def can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if response is not None and response.status_code == 429:
            self._limits.hold(method_of(request), retry_after(response.headers))
        return await super().can_retry_async(
            state=state, request=request, response=response, error=error
        )

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        return response is not None and response.status_code == 429

    async def prepare_for_next_attempt_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        state.next_attempt_requested = True
        method = method_of(request)
        while (wait := self._limits.held_for(method)) > 0:
            await asyncio.sleep(wait)
        state.increment_current_attempt()


def method_of(request: HttpRequest) -> str:
    """The Web API method a request calls: the last part of its URL's path."""
    return request.url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


def _now() -> float:
    return asyncio.get_running_loop().time()
