"""GPU-time accounting for the weekly digest, from the polls skybot takes anyway.

Each poll's usage is credited for the time since the previous poll: a job is counted from the
first poll that sees it running to the last, so each start and end is off by at most one poll
interval (15 s by default), and asking slurmdbd for a week of jobs is never needed. A gap
longer than `max_interval` (skybot or Slurm was down) is credited only `max_interval`: what
nobody saw is not invented.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from core.lab_usage import LabUsage

HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class GpuSeconds:
    """GPU-seconds one user of a lab ran in one hour, in the lab's partition or on overcap."""

    hour: float
    lab: str
    user: str
    overcap: bool
    seconds: float


def credit_poll(
    usages: Iterable[LabUsage], at: float, previous_at: float | None, max_interval: float
) -> list[GpuSeconds]:
    """GPU-seconds to add for the poll at `at` (nothing for the very first poll)."""
    if previous_at is None or at <= previous_at:
        return []
    interval = min(at - previous_at, max_interval)
    hour = hour_of(at)
    credits: list[GpuSeconds] = []
    for usage in usages:
        for user, gpus in usage.by_user.items():
            credits.append(GpuSeconds(hour, usage.lab, user, False, gpus * interval))
        for user, gpus in usage.overcap_by_user.items():
            credits.append(GpuSeconds(hour, usage.lab, user, True, gpus * interval))
    return [c for c in credits if c.seconds > 0]


def hour_of(at: float) -> float:
    return at - at % HOUR
