"""GPU counts by type from Slurm's GRES/TRES specs ("gres:gpu:a40:2", "gres/gpu:a40=2",
"gpu:a40:4(S:0)", TRES lists) and from the job fields that carry them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from core.gres_shares import split_top_level
from core.slurm_json.fields import MAX_COUNT, BadField, Fields, as_number

# Parsed GPU specs are cached by their text: at 10,000 jobs the same few dozen strings
# ("gres:gpu:a40:2", "cpu=4,mem=16G,node=1,billing=4,gres/gpu=2", ...) repeat thousands of
# times. Bounded so that a queue of unusual specs cannot grow it without limit.
_SPEC_CACHE_SIZE = 4096


class _BadGpuSpec(ValueError):
    """A GPU entry whose count or layout cannot be read."""


_TRAILING_PARENS = re.compile(r"\([^()]*\)$")


def _parse_gpu_item(item: str) -> tuple[str, int] | None:
    """(type, count) for one GRES/TRES entry, or None if it is not about GPUs.

    Types are kept exactly as Slurm reports them; "(null)" (untyped GRES in gres_used) and an
    absent type both become "".
    """
    s = _TRAILING_PARENS.sub("", item.strip())
    for prefix in ("gres:", "gres/"):
        if s.startswith(prefix):
            s = s[len(prefix) :]
            break
    count_text: str | None = None
    if "=" in s:
        s, count_text = s.rsplit("=", 1)
    parts = s.split(":")
    if parts[0] != "gpu":
        return None
    rest = parts[1:]
    if count_text is None:
        if rest and rest[-1].isdigit():
            count_text = rest.pop()
        elif len(rest) <= 1:
            count_text = "1"  # "--gres=gpu" / "gres:gpu:a40" mean one GPU
        else:
            raise _BadGpuSpec(f"cannot read GPU count in {item.strip()!r}")
    if not count_text.strip().isdigit():
        raise _BadGpuSpec(f"cannot read GPU count in {item.strip()!r}")
    count = int(count_text)
    if count >= MAX_COUNT:
        raise _BadGpuSpec(f"GPU count out of range in {item.strip()!r}")
    gpu_type = ":".join(rest)
    if gpu_type in ("(null)", "null"):
        gpu_type = ""
    return gpu_type, count


@lru_cache(maxsize=_SPEC_CACHE_SIZE)
def _gpu_entries_from_spec(spec: str) -> tuple[tuple[str, int], ...]:
    """All GPU entries of a comma-separated GRES/TRES string (cached; a bad spec raises)."""
    spec = spec.strip()
    if not spec or spec in ("(null)", "N/A"):
        return ()
    entries = []
    for item in split_top_level(spec):
        if item.strip():
            parsed = _parse_gpu_item(item)
            if parsed is not None:
                entries.append(parsed)
    return tuple(entries)


@lru_cache(maxsize=_SPEC_CACHE_SIZE)
def _combined_spec_gpus(spec: str) -> tuple[tuple[str, int], ...]:
    """`_combine_gpu_entries` of a spec, as items: a tuple, so the cached value is immutable."""
    return tuple(_combine_gpu_entries(_gpu_entries_from_spec(spec)).items())


def _gpus_from_spec(spec: str) -> dict[str, int]:
    """GPUs by type of a GRES/TRES string; a fresh dict per call, as records own theirs."""
    return dict(_combined_spec_gpus(spec))


def _gpu_entries_from_tres_list(tres: object) -> list[tuple[str, int]]:
    """GPU entries of a TRES list: [{"type": "gres", "name": "gpu:a40", "count": 2}, ...]."""
    if not isinstance(tres, list):
        raise _BadGpuSpec(f"expected a TRES list, got {tres!r}")
    entries = []
    for item in tres:
        if not isinstance(item, dict):
            raise _BadGpuSpec(f"bad TRES entry {item!r}")
        if item.get("type") != "gres":
            continue
        name = item.get("name")
        if not isinstance(name, str) or not (name == "gpu" or name.startswith("gpu:")):
            continue
        try:
            count = as_number(item.get("count"))
        except BadField as exc:
            raise _BadGpuSpec(f"bad TRES count in {item!r}") from exc
        if count is None or not 0 <= count < MAX_COUNT:
            raise _BadGpuSpec(f"bad TRES count in {item!r}")
        entries.append((name[4:], count))
    return entries


def _combine_gpu_entries(entries: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Sum entries by type; typed entries win over the untyped total.

    Slurm reports both "gres/gpu=2" and "gres/gpu:a40=2" for the same two GPUs, so the untyped
    count only adds GPUs beyond what the typed entries already account for.
    """
    typed: dict[str, int] = {}
    untyped = 0
    for gpu_type, count in entries:
        if gpu_type:
            typed[gpu_type] = typed.get(gpu_type, 0) + count
        else:
            untyped += count
    extra = untyped - sum(typed.values())
    if extra > 0:
        typed[""] = extra
    return {t: n for t, n in typed.items() if n > 0}


def scaled(gpus: dict[str, int], factor: int) -> dict[str, int]:
    return {t: n * factor for t, n in gpus.items()}


def gpus_from_spec_field(fields: Fields, key: str) -> dict[str, int]:
    spec = fields.text(key)
    try:
        return _gpus_from_spec(spec)
    except _BadGpuSpec as exc:
        fields.warn(f"{fields.prefix}{key}: {exc}")
        return {}


def gpus_from_tres_field(fields: Fields, key: str) -> dict[str, int] | None:
    """GPUs from a TRES string or list at `key`; None when the field says nothing at all."""
    value = fields.get(key)
    if value is None or value == "" or value == []:
        return None
    try:
        if isinstance(value, str):
            return _gpus_from_spec(value)
        return _combine_gpu_entries(_gpu_entries_from_tres_list(value))
    except _BadGpuSpec as exc:
        fields.warn(f"{fields.prefix}{key}: {exc}")
        return None


def gpus_from_gres_detail(fields: Fields) -> dict[str, int] | None:
    detail = fields.get("gres_detail")
    if not detail:
        return None
    if not isinstance(detail, list) or not all(isinstance(d, str) for d in detail):
        fields.warn(f"ignoring gres_detail {detail!r} (not a list of strings)")
        return None
    try:
        entries = [e for per_node in detail for e in _gpu_entries_from_spec(per_node)]
    except _BadGpuSpec as exc:
        fields.warn(f"gres_detail: {exc}")
        return None
    return _combine_gpu_entries(entries)
