"""When a stamped answer still reads right: acks in the same second, over the same snapshot,
while no source has turned stale, share one reply (handlers/commands/common.py FreshAnswer)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from handlers.reply import Block


def age_key(taken_at: float | None, now: float) -> object:
    """What the "as of" words depend on: common.ago() says "just now" up to half a second,
    else whole seconds."""
    if taken_at is None:
        return None
    return -1 if taken_at >= now - 0.5 else int(now - taken_at)


def quiet_until(sources: Iterable[tuple[float | None, float]]) -> float:
    """When the first of these sources (when taken, seconds until stale) turns stale; a
    source never read never does (its warning, if any, does not wait for time)."""
    return min(
        (taken_at + stale_after for taken_at, stale_after in sources if taken_at is not None),
        default=float("inf"),
    )


@dataclass(frozen=True)
class Stamp:
    """A warning-free reply's text and blocks and what they hold for. It keeps the snapshot,
    not the view, and no Reply: the view's memo keeps the answer, and a Reply refers to its
    answer, so either would make a cycle that outlives the snapshot."""

    snapshot: object
    in_channel: bool
    # When the first of the answer's sources turns stale: a warning appears then.
    quiet_until: float
    age: object
    text: str
    blocks: list[Block]

    def holds(self, snapshot: object, in_channel: bool, now: float, age: object) -> bool:
        return (
            self.snapshot is snapshot
            and self.in_channel == in_channel
            and now <= self.quiet_until
            and self.age == age
        )
