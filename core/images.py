"""Container image releases, and which GPUs an image is too old for.

The cluster's Enroot images are mostly converted NVIDIA NGC images under their Docker names,
e.g. `nvcr.io_nvidia_pytorch_23.12-py3.sqsh` or `dlcc_pytorch_20.10.sqsh` (container guide).
NGC tags them by release, YY.MM, and each release ships one CUDA version; newer GPUs need a
newer CUDA, hence the guide's rule: "A100 GPUs require 20.06 or newer. RTX3090 and RTX A6000
require 20.10 or newer. A10 GPUs require 21.05 or newer."
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

__all__ = [
    "GUIDE_MIN_RELEASE",
    "GpuRule",
    "Release",
    "find_gpu_rule",
    "gpu_key",
    "image_release",
    "parse_release",
]

# GPU type -> the oldest NGC release that runs on it, from the container guide. The config's
# images.min_release replaces it.
GUIDE_MIN_RELEASE: dict[str, str] = {
    "a100": "20.06",
    "rtx_3090": "20.10",
    "rtx_a6000": "20.10",
    "a10": "21.05",
}

# NGC's first release was 17.xx: an older-looking YY.MM is a version number, not a release.
_FIRST_YEAR = 17
_RELEASE = re.compile(r"(?P<year>\d{2})\.(?P<month>\d{2})")
# YY.MM as its own part of a name: after `_ - : +` (or at the start) and followed by the end
# or the tag's next part (`-py3`, `-tf2-py3`, `_igpu`). `cuda_11.8.0` and `ubuntu22.04` are
# thereby not releases.
_RELEASE_IN_NAME = re.compile(
    r"(?:^|(?P<word>[A-Za-z0-9]*)[_\-:+])(?P<year>\d{2})\.(?P<month>\d{2})(?=$|[_\-+])"
)
# Distribution base images carry the distribution's own YY.MM (`ubuntu_20.04`), not NGC's.
_DISTRIBUTIONS = frozenset({"ubuntu", "debian", "centos", "rockylinux", "almalinux", "fedora"})
# Marketing prefixes dropped when matching GPU type names: "NVIDIA GeForce RTX 3090" is 3090.
_GPU_PREFIXES = ("nvidia", "geforce", "quadro", "tesla", "rtx")


class Release(NamedTuple):
    """An NGC release, YY.MM; compares in time order."""

    year: int
    month: int

    def __str__(self) -> str:
        return f"{self.year:02d}.{self.month:02d}"


def parse_release(text: str) -> Release | None:
    """`20.06` as a Release; None unless it is exactly a plausible YY.MM."""
    match = _RELEASE.fullmatch(text.strip())
    return _release(match["year"], match["month"]) if match else None


def image_release(file_name: str) -> Release | None:
    """The NGC release in an image's file name, or None if the name gives none."""
    stem = file_name.removesuffix(".sqsh")
    for match in _RELEASE_IN_NAME.finditer(stem):
        if (match["word"] or "").casefold() in _DISTRIBUTIONS:
            continue
        release = _release(match["year"], match["month"])
        if release is not None:
            return release
    return None


def _release(year: str, month: str) -> Release | None:
    y, m = int(year), int(month)
    return Release(y, m) if y >= _FIRST_YEAR and 1 <= m <= 12 else None


class GpuRule(NamedTuple):
    gpu_type: str  # as the configuration names it
    min_release: Release


def gpu_key(name: str) -> str:
    """A GPU type name reduced to what identifies it: `A100`, `a100` -> `a100`;
    `RTX 3090`, `rtx_3090`, `GeForce RTX 3090` -> `3090`; `RTX A6000`, `a6000` -> `a6000`."""
    key = re.sub(r"[^0-9a-z]", "", name.casefold())
    for prefix in _GPU_PREFIXES:
        if key.startswith(prefix) and len(key) > len(prefix):
            key = key[len(prefix) :]
    return key


def find_gpu_rule(rules: Mapping[str, str], word: str) -> GpuRule | None:
    """The rule for the GPU type `word` names, tolerating case, spaces, `_`/`-` and a suffix
    such as Slurm's `a100_80gb` or `nvidia_a100-sxm4-80gb`; None if no rule matches."""
    by_key: dict[str, GpuRule] = {}
    for gpu_type, text in rules.items():
        release = parse_release(text)
        if release is not None:
            by_key[gpu_key(gpu_type)] = GpuRule(gpu_type, release)
    parts = [p for p in re.split(r"[\s_\-:/]+", word) if p]
    # Longest leading run of parts first, so `a100_80gb` is the A100, never an "a10".
    for end in range(len(parts), 0, -1):
        rule = by_key.get(gpu_key("".join(parts[:end])))
        if rule is not None:
            return rule
    return None
