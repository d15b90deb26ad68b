"""GPUs shared through `gres/shard` (and MPS): parts of a GPU, as Slurm writes them.

A site can configure `Name=shard Count=16 File=/dev/nvidia[0-3]`: each of the node's 4 GPUs
can then be given out in 4 shards to jobs that ask `--gres=shard:2`. Slurm gives a GPU out
either whole (gres/gpu) or in shards, never both at once, and a GPU with any shard taken is
not free for a whole-GPU job: it is not idle. Slurm's strings (src/interfaces/gres.c
`_node_gres_used`, src/stepmgr/gres_stepmgr.c `gres_stepmgr_job_build_details`):

* a node's `gres`: `gpu:a40:4,shard:a40:16` (or with sockets, `shard:a40:16(S:0-1)`);
* a node's `gres_used`, one `alloc/avail` per GPU for a shared GRES:
  `gpu:a40:1(IDX:0),shard:a40:3(2/4,1/4,0/4,0/4)`: GPUs 1 and 2 are partly used; without
  the GPUs' device files (no topology) only the count: `shard:a40:3`;
* a job's `gres_detail` per node: `shard:a40:3(3/4,0/4,0/4,0/4)`; its TRES `gres/shard=3`
  (`gres/shard:a40=3` when typed TRES are tracked); what it asked for `gres/shard:3` (24.x)
  or `gres:shard:3` (22.05).

MPS (`gres/mps`, a share of 100 per GPU) is written the same way and makes a GPU partly used
too; jobs' MPS shares are not shown (a percentage of a GPU is not a count users compare).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

SHARED_GRES = ("shard", "mps")

_ITEM = re.compile(
    r"(?:gres[:/])?(?P<name>[a-z]+)(?::(?P<type>\(null\)|[^:=()]+))?(?:[:=](?P<count>\d+))?"
    r"(?:\((?P<detail>[^()]*)\))?"
)
_PER_GPU = re.compile(r"(\d+)/(\d+)")


@dataclass(frozen=True, slots=True)
class SharedEntry:
    """One entry of a shared GRES: its GPU type ("" untyped), count, and where the string
    says so, the count on each GPU of the node (alloc of `alloc/avail`)."""

    gpu_type: str
    count: int
    per_gpu: tuple[int, ...] | None = None


def split_top_level(spec: str) -> list[str]:
    """Split on commas that are not inside parentheses ("gpu:a40:2(IDX:0,2),gpu:...")."""
    if "(" not in spec:
        return spec.split(",")  # the common case, and the same result
    items = []
    depth = 0
    start = 0
    for i, ch in enumerate(spec):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            items.append(spec[start:i])
            start = i + 1
    items.append(spec[start:])
    return items


def _items(spec: str) -> list[str]:
    """Entries of a GRES string, split on the commas outside parentheses."""
    return [item.strip() for item in split_top_level(spec) if item.strip()]


def shared_entries(spec: str, name: str = "shard") -> list[SharedEntry]:
    """The `name` entries of a GRES or TRES string; an entry that cannot be read is left out
    (it can only make a GPU seem idle that is not, never hide a whole-GPU job)."""
    if name not in spec:
        return []  # by far the most common case: no shared GRES at all
    entries = []
    for item in _items(spec):
        match = _ITEM.fullmatch(item)
        if match is None or match["name"] != name:
            continue
        gpu_type, count = match["type"] or "", match["count"]
        if count is None and gpu_type.isdigit():
            gpu_type, count = "", gpu_type  # "shard:3": a count, no type
        if gpu_type in ("(null)", "null"):
            gpu_type = ""
        per_gpu = None
        detail = match["detail"] or ""
        pairs = [_PER_GPU.fullmatch(part.strip()) for part in detail.split(",")]
        if detail and all(pairs):
            per_gpu = tuple(int(pair[1]) for pair in pairs if pair)
        entries.append(SharedEntry(gpu_type, int(count) if count else 1, per_gpu))
    return entries


def shares_by_type(entries: Iterable[SharedEntry]) -> dict[str, int]:
    """Counts by GPU type; an untyped total only adds what typed entries do not cover (Slurm
    writes both `gres/shard=3` and `gres/shard:a40=3` for the same three shards)."""
    typed: dict[str, int] = {}
    untyped = 0
    for entry in entries:
        if entry.gpu_type:
            typed[entry.gpu_type] = typed.get(entry.gpu_type, 0) + entry.count
        else:
            untyped += entry.count
    extra = untyped - sum(typed.values())
    if extra > 0:
        typed[""] = extra
    return {gpu_type: n for gpu_type, n in typed.items() if n > 0}


def shards_in_tres_list(tres: object) -> dict[str, int]:
    """Shards by type in a TRES list (sacct): `{"type": "gres", "name": "shard:a40", ...}`."""
    if not isinstance(tres, list):
        return {}
    for item in tres:
        if type(item) is dict and item.get("type") == "gres":
            name = item.get("name")
            if type(name) is str and name.startswith("shard"):
                break
    else:
        return {}  # the common case: a list of cpu, mem, node, billing and GPUs
    entries = []
    for item in tres:
        if not isinstance(item, dict) or item.get("type") != "gres":
            continue
        name, count = item.get("name"), item.get("count")
        if isinstance(count, dict):
            count = count.get("number")
        if not isinstance(name, str) or type(count) is not int or count <= 0:
            continue
        if name == "shard" or name.startswith("shard:"):
            entries.append(SharedEntry(name[6:], count))
    return shares_by_type(entries)


def partly_used_gpus(
    gres: str, gres_used: str, gpus_total: Mapping[str, int], gpus_used: Mapping[str, int]
) -> dict[str, int]:
    """A node's GPUs, by type, that hold shards (or MPS shares) of running jobs.

    From each GPU's `alloc/avail` where Slurm lists them; else the fewest GPUs the count fits
    on (the node's shares per GPU from its `gres`). Never more than the GPUs not given out
    whole."""
    shared: dict[str, int] = {}
    for name in SHARED_GRES:
        totals = shares_by_type(shared_entries(gres, name))
        for entry in shared_entries(gres_used, name):
            if entry.per_gpu is not None:
                busy = sum(1 for alloc in entry.per_gpu if alloc > 0)
            elif entry.count > 0:
                gpus = gpus_total.get(entry.gpu_type, 0)
                per_gpu = totals.get(entry.gpu_type, 0) / gpus if gpus else 0
                busy = math.ceil(entry.count / per_gpu) if per_gpu else 1
            else:
                busy = 0
            if busy:
                shared[entry.gpu_type] = shared.get(entry.gpu_type, 0) + busy
    if "" in shared and "" not in gpus_total:
        # Shards are often configured untyped on typed GPUs (`Name=shard Count=16
        # File=...`, printed `shard:(null):3(...)`): they sit on the node's typed GPUs.
        untyped = shared.pop("")
        for gpu_type in sorted(gpus_total):
            free = gpus_total[gpu_type] - gpus_used.get(gpu_type, 0) - shared.get(gpu_type, 0)
            taken = min(untyped, max(0, free))
            if taken:
                shared[gpu_type] = shared.get(gpu_type, 0) + taken
                untyped -= taken
    capped = {
        gpu_type: min(n, max(0, gpus_total.get(gpu_type, n) - gpus_used.get(gpu_type, 0)))
        for gpu_type, n in shared.items()
    }
    return {gpu_type: n for gpu_type, n in capped.items() if n}
