"""`/sky free [GPU_TYPE]`: idle GPUs by type and node, and which partitions can reach them."""

from __future__ import annotations

from collections import defaultdict

from core.lab_usage import IdleGpus
from core.reservations import node_note
from core.view import ClusterView
from handlers.commands.common import (
    answer,
    at_most_one,
    bounded,
    did_you_mean,
    gpu_type_name,
    literal,
    overcap_flags,
    require_data,
    shown,
)
from handlers.reply import Reply
from handlers.router import Command, CommandRequest, UsageError

USAGE = "free [GPU_TYPE]"


def run(request: CommandRequest, view: ClusterView) -> Reply:
    arg = at_most_one(request, USAGE)
    require_data(view, "slurm")
    wanted = _gpu_type(view, arg) if arg is not None else None
    idle = [i for i in view.idle if wanted is None or i.gpu_type == wanted]
    if not idle:
        return answer(view, request, [_none_idle(view, wanted)], "slurm")
    by_type: dict[str, list[IdleGpus]] = defaultdict(list)
    for item in idle:
        by_type[item.gpu_type].append(item)
    lines: list[str] = []
    # Most idle type first; within a type, view.idle already lists the emptiest node first.
    for gpu_type, items in sorted(by_type.items(), key=lambda kv: -sum(i.count for i in kv[1])):
        lines.append(f"*{literal(gpu_type_name(gpu_type))}*: {sum(i.count for i in items)} idle")
        lines += [_node_line(view, i, request.now) for i in items]
    lines = bounded(lines)
    lines.append(
        f"Your lab's partition uses your cap; overcap ({overcap_flags(view)}) can use any idle "
        "GPU but may be preempted."
    )
    return answer(view, request, lines, "slurm", also=("limits",))


def _node_line(view: ClusterView, item: IdleGpus, now: float) -> str:
    line = f"    {literal(item.node)}: {item.count} — partitions: {_partitions(item.partitions)}"
    note = node_note(view.snapshot.limits, item.node, now)
    return f"{line} — {note}" if note else line


def _known_types(view: ClusterView) -> list[str]:
    return sorted({t for node in view.snapshot.nodes for t in node.gpus_total})


def _gpu_type(view: ClusterView, word: str) -> str:
    """The GPU type the user meant (any case; 'gpu' for untyped GPUs), or a UsageError."""
    known = _known_types(view)
    by_name = {gpu_type_name(t).casefold(): t for t in known}
    if word.casefold() in by_name:
        return by_name[word.casefold()]
    listing = ", ".join(f"{literal(gpu_type_name(t))}" for t in known) or "none yet"
    hint = did_you_mean(word, [gpu_type_name(t) for t in known])
    maybe = f" Did you mean {literal(hint)}?" if hint else ""
    raise UsageError(f"I don't know GPU type {shown(word)}.{maybe} Known types: {listing}.")


def _none_idle(view: ClusterView, wanted: str | None) -> str:
    if wanted is None:
        return "No idle GPUs anywhere in the cluster right now."
    nodes = [n for n in view.snapshot.nodes if wanted in n.gpus_total]
    total = sum(n.gpus_total[wanted] for n in nodes)
    down = sum(n.gpus_total[wanted] for n in nodes if not n.schedulable)
    unusable = f", {down} on nodes that are down or drained" if down else ""
    name = literal(gpu_type_name(wanted))
    return f"No idle {name} GPUs right now ({total} in the cluster{unusable})."


COMMAND = Command(
    "free",
    USAGE,
    "idle GPUs by type and node, and the partitions that can use them",
    run,
    "Drained or down nodes are not counted. Give a GPU type (e.g. `a40`) to see only that type.",
    same_for=lambda args, asker: None,  # the cluster's, the same for everyone
)


def _partitions(names: list[str] | tuple[str, ...]) -> str:
    return literal(", ".join(names)) if names else "?"
