"""What a chart is, apart from drawing it: which chart over which window, and its samples.

Kept apart from core/charts.py so the outbox, the store and the commands can name charts
without importing matplotlib (half a second and tens of megabytes) until one is drawn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

LAB_GPUS = "lab_gpus"
LAB_DISK = "lab_disk"
CHART_KINDS = (LAB_GPUS, LAB_DISK)


@dataclass(frozen=True, slots=True)
class ChartSpec:
    """Which chart to draw, over a fixed window: a retried upload draws the same picture."""

    kind: str
    lab: str
    since: float
    until: float

    def to_json(self) -> str:
        return json.dumps(
            {"kind": self.kind, "lab": self.lab, "since": self.since, "until": self.until}
        )

    @classmethod
    def from_json(cls, text: str) -> ChartSpec:
        data = json.loads(text)
        return cls(str(data["kind"]), str(data["lab"]), float(data["since"]), float(data["until"]))

    @property
    def filename(self) -> str:
        return f"{self.lab}-{'gpus' if self.kind == LAB_GPUS else 'disk'}.png"


@dataclass(frozen=True, slots=True)
class ChartFile:
    """A drawn chart, ready to upload; `alt_text` describes it for screen readers."""

    png: bytes
    filename: str
    title: str
    alt_text: str


@dataclass(frozen=True, slots=True)
class UsageSample:
    """One poll's view of a lab: GPUs in its partition, its cap then, its overcap GPUs."""

    at: float
    gpus_used: int
    cap: int | None
    overcap_gpus: int


@dataclass(frozen=True, slots=True)
class SizeSample:
    """One weekly report's size of a directory."""

    at: float
    kib: int
