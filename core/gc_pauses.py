"""Keeping the garbage collector from holding the event loop while big data is handled.

At 100,000 jobs a snapshot, a poll's answer or a first poll's save is hundreds of thousands
of objects. A collection set off while they are made traverses them all and holds the
interpreter, on whatever thread, for 40-120 ms (benchmarks/poll_ack_latency.py --probe):
every slash command's ack waits. None of them holds cycles, so collecting is not needed
to free them; these helpers turn it off while they are made, and take what survives out
of later collections' reach.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def no_collections() -> Iterator[None]:
    """No automatic collection inside the block (process-wide: on every thread). What
    the block makes without cycles is freed as usual when its last reference goes."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def exempt_from_full_collections() -> None:
    """Move everything alive now out of the garbage collector's reach. At 100,000 jobs the
    snapshot is some 300,000 tracked objects, and a full collection over them holds the
    interpreter for 100-200 ms. The price: cyclic garbage older than the young
    generations, alive when this runs, is never collected (the young ones are collected
    first); the snapshot holds no cycles."""
    gc.collect(1)
    gc.freeze()
