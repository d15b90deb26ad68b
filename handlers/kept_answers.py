"""Answers worked out once per snapshot and stamped per ack (Command.same_for).

`/sky gpus LAB` reads the same for everyone until the next poll, but for its freshness lines
("as of 12 s ago", a source gone stale or failing): the ack path keeps the rest (the reply's
`fresh`, from `answer()`) in the view, so it dies with its snapshot, and stamps it again for
each ack. A command says what about the asker its answer depends on; the key holds that,
so one asker's answer never reaches another whose answer differs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from core.view import ClusterView
from handlers.reply import Reply, Restamp

# Per snapshot: enough for every lab asked by every asker, bounded so that whatever anyone
# types cannot grow a view's memo between polls.
MAX_KEPT_ANSWERS = 512
# The view's memo they are kept in.
MEMO = "kept answers"


def kept_answer(
    key: Hashable, view: ClusterView, now: float, in_channel: bool, answer: Callable[[], Reply]
) -> Reply:
    """The answer kept under `key` over this view, stamped at `now`; else `answer()`, kept if
    stamping it again gives this very answer (not so for a command that adds to `answer()`'s
    reply, as `jobs` adds its buttons: that is worked out every time)."""
    kept: dict[Hashable, Restamp] = view.memo(MEMO, dict)
    fresh = kept.get(key)
    if fresh is not None:
        return fresh.at(view, now, in_channel)
    reply = answer()
    fresh = reply.fresh
    if (
        fresh is not None
        and len(kept) < MAX_KEPT_ANSWERS
        and fresh.at(view, now, in_channel) == reply
    ):
        kept[key] = fresh
    return reply
