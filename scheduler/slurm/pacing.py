"""How often to poll Slurm: the configured interval, stretched while polls are expensive.

A poll of a very large queue can take seconds of the controller's and the bot host's time;
polled every 15 s regardless, skybot would become the `watch squeue` it replaces. So when one
poll takes more than `max_share` of the interval, the interval grows until the poll is that
share of it (at most `max_seconds`); once polls are cheap again it comes back down, never
below the configured interval.
"""

from __future__ import annotations

from dataclasses import dataclass

# Set with some headroom, and shrunk only when the wanted interval is clearly shorter, so
# that polls of about the same cost do not make the interval (and the log) flap.
_GROW_HEADROOM = 1.25
_SHRINK_BELOW = 0.75


@dataclass
class PollPacer:
    base_seconds: float
    max_share: float
    max_seconds: float
    interval: float = 0.0

    def __post_init__(self) -> None:
        self.interval = self.interval or self.base_seconds

    def observe(self, poll_seconds: float) -> float | None:
        """After a poll that took `poll_seconds`: the new interval, or None if unchanged."""
        wanted = poll_seconds / self.max_share
        if self.interval * _SHRINK_BELOW < wanted <= self.interval:
            return None
        wanted = min(self.max_seconds, max(self.base_seconds, wanted * _GROW_HEADROOM))
        if wanted == self.interval:
            return None
        self.interval = wanted
        return wanted


def pending_listing_due(
    since_last: float | None, interval: float, poll_seconds: float, bound: float
) -> bool:
    """Whether this poll must list pending jobs' settings for a change made just after the
    last listing (`since_last` seconds ago, None if none committed) to show within `bound`.

    Skipping it here moves the listing to the next poll, `interval` later, which shows such
    a change `since_last + interval` after it was made, plus that poll's own time (taken
    to be like the last one's, `poll_seconds`). A bound shorter than one interval plus a
    poll cannot be kept: then every poll lists."""
    if since_last is None:
        return True
    return since_last + interval + poll_seconds > bound
