"""Nodes from `sinfo --json` / `scontrol show nodes --json`."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from core.gres_shares import partly_used_gpus
from core.records import Node
from core.slurm_json.documents import document_list, slurm_messages
from core.slurm_json.fields import Fields, ParseResult
from core.slurm_json.gpus import gpus_from_spec_field


def _node_state_text(state: object, flags: object, fields: Fields) -> str:
    """State like MIXED or IDLE+DRAIN: 22.05 gives "idle" + state_flags, newer gives a list."""
    words: list[str]
    if isinstance(state, str):
        words = [state]
    elif isinstance(state, list) and all(isinstance(s, str) for s in state):
        words = list(state)
    else:
        fields.warn(f"unreadable state {state!r}")
        return "UNKNOWN"
    words = [w.upper() for w in words if w]
    if isinstance(flags, list):
        words += [fl.upper() for fl in flags if isinstance(fl, str) and fl.upper() not in words]
    return "+".join(words) or "UNKNOWN"


def _gpus_shared(
    gres: object, gres_used: object, gpus_total: dict[str, int], gpus_used: dict[str, int]
) -> dict[str, int]:
    if not isinstance(gres_used, str) or not isinstance(gres, str):
        return {}
    return partly_used_gpus(gres, gres_used, gpus_total, gpus_used)


def _node_from_nodes_entry(raw: dict[str, Any], label: str, warnings: list[str]) -> Node | None:
    """One node of `{"nodes": [...]}` (sinfo 22.05, scontrol show nodes --json later)."""
    f = Fields(raw, label, warnings)
    name = f.text("name")
    if not name:
        warnings.append(f"{label} skipped: missing name")
        return None
    f.label = f"node {name}"
    gpus_total = gpus_from_spec_field(f, "gres")
    gpus_used = gpus_from_spec_field(f, "gres_used")
    return Node(
        name=name,
        state=_node_state_text(f.get("state"), f.get("state_flags"), f),
        partitions=tuple(f.strings("partitions")),
        gpus_total=gpus_total,
        gpus_used=gpus_used,
        gpus_shared=_gpus_shared(f.get("gres"), f.get("gres_used"), gpus_total, gpus_used),
        cpus=f.u32("cpus") or 0,
        cpus_allocated=f.u32("alloc_cpus") or 0,
        hostname=f.text("hostname"),
    )


_BRACKETS = re.compile(r"^(?P<prefix>[^\[\]]*)\[(?P<ranges>[^\[\]]+)\](?P<suffix>[^\[\]]*)$")


def _expand_hostlist(expr: str) -> list[str]:
    """Expand "node[01-03,07]" (one bracket group); anything fancier is returned as-is."""
    if "[" not in expr:
        return [expr]  # a plain name, by far the most common
    match = _BRACKETS.match(expr)
    if not match:
        return [expr]
    names = []
    for part in match["ranges"].split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return [expr]
        width = len(lo)
        for i in range(int(lo), int(hi or lo) + 1):
            names.append(f"{match['prefix']}{i:0{width}d}{match['suffix']}")
    return names


def _nodes_from_sinfo_entry(raw: dict[str, Any], label: str, warnings: list[str]) -> list[Node]:
    """Nodes of one `{"sinfo": [...]}` entry (23.02+): one partition x one group of nodes.

    sinfo groups nodes that look alike, so gres totals/used are per node; CPU counts are
    group totals and are split evenly when a group has several nodes.
    """
    f = Fields(raw, label, warnings)
    names = [n for expr in f.sub("nodes").strings("nodes") for n in _expand_hostlist(expr)]
    if not names:
        warnings.append(f"{label} skipped: no node names")
        return []
    partition = f.get("partition")
    partition_name = (
        f.sub("partition").text("name") if isinstance(partition, dict) else f.text("partition")
    )
    state = _node_state_text(f.sub("node").get("state"), None, f)
    gres = f.sub("gres")
    gpus_total = gpus_from_spec_field(gres, "total")
    gpus_used = gpus_from_spec_field(gres, "used")
    gpus_shared = _gpus_shared(gres.get("total"), gres.get("used"), gpus_total, gpus_used)
    count = len(names)
    cpus_field = f.sub("cpus")
    cpus = cpus_field.u32("total") or 0
    allocated = cpus_field.u32("allocated") or 0
    if count > 1:
        cpus = cpus_field.u32("maximum") or cpus // count
        allocated = allocated // count
    return [
        Node(
            name=name,
            state=state,
            partitions=(partition_name,) if partition_name else (),
            gpus_total=dict(gpus_total),
            gpus_used=dict(gpus_used),
            gpus_shared=dict(gpus_shared),
            cpus=cpus,
            cpus_allocated=allocated,
        )
        for name in names
    ]


def _merge_node(existing: Node, extra: Node) -> Node:
    """The same node listed under several partitions: keep one record, all partitions."""
    partitions = existing.partitions + tuple(
        p for p in extra.partitions if p not in existing.partitions
    )
    return replace(existing, partitions=partitions)


def sinfo_is_grouped(data: object) -> bool:
    """Whether this is 23.02+'s grouped `sinfo --json`, whose entries carry one node's GPU
    totals for a whole group: then per-node figures must come from `scontrol show nodes`."""
    return isinstance(data, dict) and "sinfo" in data and "nodes" not in data


def parse_sinfo(data: dict[str, Any]) -> ParseResult[Node]:
    """Nodes from `sinfo --json` / `scontrol show nodes --json`, any version.

    Reads `{"nodes": [...]}` (22.05 sinfo, scontrol in all versions) and the grouped
    `{"sinfo": [...]}` of 23.02+ sinfo. A node appears once, with all its partitions.
    """
    key, raw_entries = document_list(data, ("nodes", "sinfo"), "sinfo")
    assert isinstance(data, dict)
    result: ParseResult[Node] = ParseResult(warnings=slurm_messages(data))
    by_name: dict[str, Node] = {}
    for index, raw in enumerate(raw_entries):
        label = f"node record #{index}"
        if not isinstance(raw, dict):
            result.warnings.append(f"{label} skipped: not an object ({raw!r:.60})")
            continue
        try:
            if key == "nodes":
                node = _node_from_nodes_entry(raw, label, result.warnings)
                nodes = [node] if node else []
            else:
                nodes = _nodes_from_sinfo_entry(raw, label, result.warnings)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            result.warnings.append(f"{label} skipped: {exc}")
            continue
        for node in nodes:
            seen = by_name.get(node.name)
            by_name[node.name] = _merge_node(seen, node) if seen else node
    result.records.extend(by_name.values())
    return result
