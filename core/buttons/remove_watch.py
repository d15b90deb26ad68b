"""The "Remove #N" buttons under `/sky watch`'s list and the Home tab's watches.

The button carries only the watch's number; handlers/buttons/remove_watch.py removes it from
the clicking Slack user's own watches only.
"""

from __future__ import annotations

from core.blocks import Block
from core.buttons import ButtonKind, actions_block, button
from core.gpu_watch import Watch

REMOVE_WATCH = ButtonKind("Remove watch", "skybot_unwatch", "[0-9]{1,12}")
# Slack allows 25 elements in an actions block; a long list offers the first few.
MAX_BUTTONS = 5


def watch_number_of(value: str) -> int | None:
    """The watch a button value names, or None unless it is one skybot builds."""
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 12 else None


def remove_buttons(watches: list[Watch]) -> list[Block]:
    """An actions block with a Remove button per watch."""
    return actions_block(
        [
            button(REMOVE_WATCH, str(w.id), f"Remove #{w.id}", str(w.id))
            for w in watches[:MAX_BUTTONS]
        ]
    )
