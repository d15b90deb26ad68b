"""How long drawing a chart takes, and what it costs in memory, at a real week's history.

The outbox draws each chart in a worker thread when it sends it, never on a command's ack
path; this says how long that thread is busy. A week of 15 s polls is 40,320 samples per lab;
the disk chart has 8 directories with 12 weekly reports each.
Run: python3 benchmarks/chart_render.py
"""

from __future__ import annotations

import resource
import statistics
import sys
import time
from datetime import UTC
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.chart_specs import SizeSample, UsageSample
from core.charts import directory_growth_figure, lab_gpu_figure, png_bytes

DAY = 86400.0
NOW = 1_800_000_000.0
RUNS = 7


def week_of_polls(interval: float) -> list[UsageSample]:
    count = int(7 * DAY / interval)
    return [
        UsageSample(NOW - 7 * DAY + i * interval, (i // 240) % 5, 4, (i // 97) % 3)
        for i in range(count)
    ]


def twelve_weeks() -> dict[str, list[SizeSample]]:
    return {
        f"user{d}": [
            SizeSample(NOW - (11 - w) * 7 * DAY, (d + 1) * 2**30 + w * 2**27) for w in range(12)
        ]
        for d in range(8)
    }


def timed(draw: object) -> tuple[float, int]:
    """Median seconds over RUNS draws, and the PNG's size."""
    seconds = []
    size = 0
    for _ in range(RUNS):
        started = time.perf_counter()
        size = len(png_bytes(draw()))  # type: ignore[operator]
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), size


def main() -> None:
    print(f"{'chart':<44} {'samples':>8} {'median':>9} {'PNG':>8}")
    for interval in (60.0, 15.0, 5.0):
        samples = week_of_polls(interval)
        median, size = timed(
            lambda s=samples, gap=4 * interval: lab_gpu_figure(
                "lab", s, NOW - 7 * DAY, NOW, UTC, gap
            )
        )
        label = f"GPUs vs cap, 7 days of {interval:.0f} s polls"
        print(f"{label:<44} {len(samples):>8} {median * 1000:>7.0f}ms {size / 1024:>6.0f}KB")
    series = twelve_weeks()
    median, size = timed(lambda: directory_growth_figure("lab", series, NOW - 84 * DAY, NOW, UTC))
    label = "largest directories, 12 weekly reports"
    print(f"{label:<44} {8 * 12:>8} {median * 1000:>7.0f}ms {size / 1024:>6.0f}KB")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {peak:.0f} MB")


if __name__ == "__main__":
    main()
