"""Exponential back-off for a poller whose source is failing."""

from __future__ import annotations

from dataclasses import dataclass

TICK_JITTER_SECONDS = 1.0


@dataclass
class Backoff:
    """After n consecutive failures, wait base * 2**(n-1) (capped) before trying again.

    The scheduler keeps firing at the normal interval; a poll inside the wait is skipped, so
    recovery is noticed within one interval of the wait ending.
    """

    base_seconds: float
    max_seconds: float = 300.0
    failures: int = 0
    retry_at: float = 0.0

    def should_skip(self, now: float) -> bool:
        if self.retry_at - now > self.max_seconds + TICK_JITTER_SECONDS:
            # Further off than any wait this gives out: the wall clock was stepped back
            # since. Waiting the step out would stop the poll for that long; retry now.
            self.retry_at = now
        # A retry due a few ms after the scheduler's tick is due at that tick: otherwise
        # timer jitter alone would add one more interval to every recovery.
        return now < self.retry_at - TICK_JITTER_SECONDS

    def failed(self, now: float) -> float:
        self.failures += 1
        delay = min(self.max_seconds, self.base_seconds * 2.0 ** (self.failures - 1))
        self.retry_at = now + delay
        return delay

    def succeeded(self) -> None:
        self.failures = 0
        self.retry_at = 0.0
