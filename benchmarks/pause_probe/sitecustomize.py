"""Diagnostics for benchmarks/poll_ack_latency.py --probe: what holds the bot's process.

Put on the bot's PYTHONPATH only by that option. A watchdog thread wakes every 5 ms; when
it wakes over 15 ms late (the interpreter lock was held elsewhere, or the process got no
CPU), it logs how late, every thread's CPU time in that gap (from /proc: which thread ran),
and the main thread's stack. Collections over 10 ms are logged with their duration. Lines start
with the wall-clock time, to set beside the load generator's slow acks.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import traceback

_TICK = 0.005
_LATE = 0.015
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _say(text: str) -> None:
    sys.stderr.write(f"probe {time.time():.3f} {text}\n")
    sys.stderr.flush()


def _thread_cpu() -> dict[str, float]:
    """CPU seconds per thread of this process, by thread name (from /proc)."""
    cpu = {}
    names = {thread.native_id: thread.name for thread in threading.enumerate()}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as stat:
                text = stat.read()
            with open(f"/proc/self/task/{tid}/comm") as comm:
                name = comm.read().strip()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        cpu[names.get(int(tid), f"{name}/{tid}")] = (
            int(fields[11]) + int(fields[12])
        ) / _CLOCK_TICKS
    return cpu


def _watch() -> None:
    main = threading.main_thread().ident
    before = _thread_cpu()
    while True:
        start = time.perf_counter()
        time.sleep(_TICK)
        late = time.perf_counter() - start - _TICK
        now = _thread_cpu()
        if late > _LATE:
            ran = {k: round(v - before.get(k, 0.0), 3) for k, v in now.items()}
            ran = {k: v for k, v in ran.items() if v > 0}
            frame = sys._current_frames().get(main)
            stack = "".join(traceback.format_stack(frame, limit=6)) if frame else ""
            # Little CPU in the gap: the process was not scheduled (a busy host), not held.
            _say(
                f"late {late * 1000:.0f} ms; the process ran {sum(ran.values()) * 1000:.0f} ms "
                f"of CPU in the gap, by thread: {ran}\n{stack}"
            )
        before = now


_gc_start = [0.0]


def _on_gc(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _gc_start[0] = time.perf_counter()
        return
    took = time.perf_counter() - _gc_start[0]
    if took > 0.010:
        # The stack that allocated when the collection set off: what made the garbage.
        stack = "".join(traceback.format_stack(sys._getframe(1), limit=6))
        _say(
            f"gc generation {info['generation']} took {took * 1000:.0f} ms "
            f"on {threading.current_thread().name}\n{stack}"
        )


# The bot only (`python -m bot.cli`), not its poll worker (`python -c`), which inherits the
# environment and is expected to be busy.
if sys.argv[:1] != ["-c"]:
    gc.callbacks.append(_on_gc)
    threading.Thread(target=_watch, name="pause-probe", daemon=True).start()
