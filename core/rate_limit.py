"""Per-user token buckets: how often one person may make skybot start the runner.

Each run of the runner is a sudo, a Python start and a Slurm call; without a limit one user
could keep the machine and slurmctld busy from Slack (30 `/sky cancel` in 4 s was seen). A
bucket holds `capacity` tokens, refilled one every `refill_seconds`; a command takes one,
and gives it back if it turns out to start nothing (bad input).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

# A burst of 10 (a few submissions in a row), then 10 a minute.
DEFAULT_CAPACITY = 10
DEFAULT_REFILL_SECONDS = 6.0


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    def __init__(
        self, capacity: int = DEFAULT_CAPACITY, refill_seconds: float = DEFAULT_REFILL_SECONDS
    ) -> None:
        self.capacity = capacity
        self.refill_seconds = refill_seconds
        self._buckets: dict[Hashable, _Bucket] = {}

    def take(self, key: Hashable, now: float) -> float:
        """0.0 if `key` may go ahead now (a token is used), else the seconds until it may."""
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(self.capacity), now)
        elapsed = max(0.0, now - bucket.updated)
        bucket.tokens = min(float(self.capacity), bucket.tokens + elapsed / self.refill_seconds)
        bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) * self.refill_seconds

    def give_back(self, key: Hashable) -> None:
        """Return the token `key` just took: what it asked for started nothing."""
        bucket = self._buckets.get(key)
        if bucket is not None:
            bucket.tokens = min(float(self.capacity), bucket.tokens + 1.0)
