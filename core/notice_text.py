"""How figures read in what skybot posts: durations, sizes, GPU counts, mentions.

They live in `core` because the decisions that compose notices (job DMs, storage alerts) are
pure functions; `handlers.commands.common` re-exports them, so commands read the same. The
blocks those messages are made of are core/blocks.py's.
"""

from __future__ import annotations

from collections.abc import Mapping

from core.slack_text import literal


def format_duration(seconds: float) -> str:
    """'45 s', '12 min', '3 h 12 min', '2 d 4 h': two units at most, for quick reading."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if s < 3600:
        return f"{minutes} min"
    if s < 86400:
        rest = minutes % 60
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    rest = hours % 24
    return f"{days} d {rest} h" if rest else f"{days} d"


def plural(count: int, noun: str, many: str = "") -> str:
    """'1 GPU', '2 GPUs', '0 GPUs', '1 time': the one place a count meets its noun, so no
    message reads "1 GPUs". `many` is the plural where adding an s is wrong."""
    return f"{count} {noun if count == 1 else (many or noun + 's')}"


def format_bytes(count: int) -> str:
    """Binary units with df -h's letters ('8.7T', '127G'), as the cluster's users know them."""
    value = float(max(0, count))
    unit = "B"
    for unit in ("B", "K", "M", "G", "T", "P"):
        if value < 1024 or unit == "P":
            break
        value /= 1024
    if unit == "B":
        return f"{int(value)}B"
    return f"{value:.1f}{unit}" if value < 100 else f"{value:.0f}{unit}"


def format_signed_bytes(delta: int) -> str:
    """'+1.2T' or '-300G': growth between two reports."""
    return ("+" if delta >= 0 else "-") + format_bytes(abs(delta))


def format_gpus(by_type: Mapping[str, int]) -> str:
    """'a40:2' or 'a40:1 rtx_6000:1', as in `--gpus-per-node`; untyped GPUs as 'gpu:N'."""
    parts = [f"{t or 'gpu'}:{n}" for t, n in sorted(by_type.items()) if n]
    return literal(" ".join(parts)) if parts else "no GPUs"


def format_job_gpus(gpus: Mapping[str, int], shards: Mapping[str, int]) -> str:
    """A job's GPUs and GPU shards as `--gres` spells them: 'a40:1 shard:a40:2'; 'no GPUs'."""
    parts = [f"{t or 'gpu'}:{n}" for t, n in sorted(gpus.items()) if n]
    parts += [f"shard:{t}:{n}" if t else f"shard:{n}" for t, n in sorted(shards.items()) if n]
    return literal(" ".join(parts)) if parts else "no GPUs"


def mention(slack_user_ids: list[str] | tuple[str, ...], fallback: str) -> str:
    """`<@U…>` for each linked Slack account, else the cluster name as an inert literal."""
    if slack_user_ids:
        return " ".join(f"<@{uid}>" for uid in slack_user_ids)
    return literal(fallback)
