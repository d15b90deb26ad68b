"""`skybot run` with every `/sky` answered by the first answer it gave, for
benchmarks/ack_vs_bolt.py --fixed-answer: what skybot costs per ack apart from working out
the answer (Bolt, the listener, who asked, metrics), against a bare Bolt app."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import handlers.slash
from handlers.reply import Reply
from handlers.router import dispatch

first: list[Reply] = []


async def first_answer(*args: object, **kwargs: object) -> Reply:
    if not first:
        first.append(await dispatch(*args, **kwargs))  # type: ignore[arg-type]
    return first[0]


handlers.slash.dispatch = first_answer  # type: ignore[assignment]
sys.argv = ["bot.cli", *sys.argv[1:]]
runpy.run_module("bot.cli", run_name="__main__")
