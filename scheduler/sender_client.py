"""The outbox sender's Web API client, and what it tells the metrics about each attempt.

The SDK retries a 429 (after its Retry-After) and a dropped connection by itself, so the
sender sees only the last answer of several: three 429s were counted as one in
`skybot_slack_sends_total`. Each retry the SDK grants is observed here as the failed send
it was. Every call keeps Slack's limits (scheduler/slack_limits.py): its method's pace, and
no call to a method Slack answered 429 until its Retry-After has passed.
"""

from __future__ import annotations

from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient

from scheduler.outbox_sender import ObserveSend
from scheduler.slack_limits import LimitedClient, RetryAfter, SlackLimits


def sender_client(
    token: str,
    base_url: str,
    observe: ObserveSend | None = None,
    limits: SlackLimits | None = None,
) -> AsyncWebClient:
    """A Web API client for the sender: a couple of in-SDK retries, then the outbox's own.

    Few in-SDK 429 retries, each after Slack's Retry-After, and then the outbox's own. Each
    retried attempt is observed like a failed send: Slack answered three 429s, that is three.
    `limits` is shared with the bot's other clients of the same token.
    """
    limits = limits or SlackLimits()
    return LimitedClient(
        limits=limits,
        token=token,
        base_url=base_url,
        retry_handlers=[
            _Counted(AsyncConnectionErrorRetryHandler(max_retry_count=1), "network_error", observe),
            _Counted(RetryAfter(limits, max_retry_count=2), "ratelimited", observe),
        ],
    )


class _Counted(AsyncRetryHandler):
    """Another retry handler, each retry it grants observed as the failed send it was."""

    def __init__(self, inner: AsyncRetryHandler, outcome: str, observe: ObserveSend | None):
        super().__init__(
            max_retry_count=inner.max_retry_count, interval_calculator=inner.interval_calculator
        )
        self._inner = inner
        self._outcome = outcome
        self._observe = observe

    async def can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        retry = await self._inner.can_retry_async(
            state=state, request=request, response=response, error=error
        )
        if retry and self._observe is not None:
            self._observe(self._outcome)
        return retry

    async def prepare_for_next_attempt_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        """The wrapped handler's wait (a 429's is its Retry-After), not the base class's
        back-off of about a second, which retried `Retry-After: 10` after ~1 s (issue 40)."""
        await self._inner.prepare_for_next_attempt_async(
            state=state, request=request, response=response, error=error
        )
