"""Fault injection: make the next N requests to a method fail the way Slack fails.

Lets tests prove the bot retries what Slack asks it to retry (429 + Retry-After, 5xx) and
parks what will never succeed (``ok: false`` errors such as channel_not_found).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Fault:
    """An injected failure for the next ``remaining`` requests to one method."""

    status: int
    error: str
    retry_after: int | None
    remaining: int

    @property
    def headers(self) -> dict[str, str]:
        return {} if self.retry_after is None else {"Retry-After": str(self.retry_after)}


class FaultBook:
    """Queued faults per method, consumed in the order they were added."""

    def __init__(self) -> None:
        self._queues: dict[str, list[Fault]] = {}

    def add(
        self,
        method: str,
        *,
        status: int = 200,
        error: str | None = None,
        retry_after: int | None = None,
        times: int = 1,
    ) -> Fault:
        if status == 200 and error is None:
            raise ValueError("an HTTP 200 failure needs an error code, e.g. 'channel_not_found'")
        if times < 1:
            raise ValueError("times must be at least 1")
        if status == 429:  # Slack always says how long to back off
            error = error or "ratelimited"
            retry_after = 1 if retry_after is None else retry_after
        fault = Fault(status, error or "internal_error", retry_after, times)
        self._queues.setdefault(method, []).append(fault)
        return fault

    def take(self, method: str) -> Fault | None:
        """The fault to serve for this request to ``method``, if any is pending."""
        queue = self._queues.get(method)
        if not queue:
            return None
        fault = queue[0]
        fault.remaining -= 1
        if fault.remaining <= 0:
            queue.pop(0)
        return fault
