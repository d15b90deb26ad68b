"""Drawing a queued chart: its samples from the stored history, the picture in a worker thread.

Charts are drawn when the outbox sends them, never on a command's ack path: matplotlib takes
a few hundred milliseconds per picture, and a retried upload simply draws the same window again.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, tzinfo

from core.chart_specs import LAB_DISK, LAB_GPUS, ChartFile, ChartSpec, SizeSample, UsageSample
from core.config_schema import Config
from scheduler.chart_upload import ChartUnavailable
from store.history import directory_size_series, lab_usage_samples
from store.writer import StoreWriter

# Lines on the disk chart: more than this is unreadable.
MAX_DIRECTORIES_CHARTED = 8


class ChartMaker:
    """The outbox sender's ChartRenderer."""

    def __init__(self, config: Config, writer: StoreWriter, tz: tzinfo | None = None) -> None:
        self._config = config
        self._writer = writer
        self._tz = tz or datetime.now().astimezone().tzinfo

    async def __call__(self, spec: ChartSpec) -> ChartFile:
        found = self._config.lab_anywhere(spec.lab)
        if found is None:
            raise ChartUnavailable(f"no lab named {spec.lab!r} in the config")
        assert self._tz is not None
        on, lab = found
        cluster = on.name
        # Where several clusters are served, a chart's title says whose lab (and filesystem).
        shown = cluster if len(self._config.clusters) > 1 else ""
        if spec.kind == LAB_GPUS:
            samples = await self._writer.run(
                lab_usage_samples, cluster, lab.name, spec.since, spec.until
            )
            poll_seconds = on.slurm.poll_seconds
            return await asyncio.to_thread(self._gpu_chart, spec, samples, shown, poll_seconds)
        if spec.kind == LAB_DISK:
            series = await self._writer.run(
                directory_size_series,
                cluster,
                lab.storage_roots,
                spec.since,
                spec.until,
                MAX_DIRECTORIES_CHARTED,
            )
            return await asyncio.to_thread(self._disk_chart, spec, series, shown)
        raise ChartUnavailable(f"unknown chart kind {spec.kind!r}")

    def _gpu_chart(
        self, spec: ChartSpec, samples: list[UsageSample], shown: str, poll_seconds: float
    ) -> ChartFile:
        # matplotlib loads with the first chart, not with every skybot process that starts.
        from core.charts import lab_gpu_figure, png_bytes

        assert self._tz is not None
        # A gap of a few of its cluster's polls is an outage, drawn as a break in the line.
        gap = 4 * poll_seconds
        figure = lab_gpu_figure(spec.lab, samples, spec.since, spec.until, self._tz, gap)
        return ChartFile(
            png_bytes(figure),
            spec.filename,
            f"{spec.lab}{_on(shown)}: GPUs in use against the cap",
            _gpu_alt_text(spec.lab, samples),
        )

    def _disk_chart(
        self, spec: ChartSpec, series: dict[str, list[SizeSample]], shown: str = ""
    ) -> ChartFile:
        from core.charts import directory_growth_figure, png_bytes

        assert self._tz is not None
        figure = directory_growth_figure(spec.lab, series, spec.since, spec.until, self._tz)
        return ChartFile(
            png_bytes(figure),
            spec.filename,
            f"{spec.lab}{_on(shown)}: growth of the largest directories",
            _disk_alt_text(spec.lab, series),
        )


def _on(shown: str) -> str:
    return f" on cluster {shown}" if shown else ""


def _gpu_alt_text(lab: str, samples: list[UsageSample]) -> str:
    if not samples:
        return f"Chart of {lab}'s GPU use: no samples in this period."
    peak = max(s.gpus_used for s in samples)
    mean = sum(s.gpus_used for s in samples) / len(samples)
    caps = {s.cap for s in samples if s.cap is not None}
    cap = f", cap {max(caps)}" if caps else ""
    return (
        f"Chart of {lab}'s GPUs in use over time: peak {peak}, average {mean:.1f}{cap}, "
        f"from {len(samples)} samples."
    )


def _disk_alt_text(lab: str, series: dict[str, list[SizeSample]]) -> str:
    if not series:
        return f"Chart of {lab}'s directory sizes: no reports in this period."
    parts = [
        f"{name} {samples[0].kib / 1024**2:.1f} to {samples[-1].kib / 1024**2:.1f} GiB"
        for name, samples in series.items()
    ]
    return f"Chart of {lab}'s largest directories over time: " + "; ".join(parts) + "."
