"""Chart pictures from stored history: a lab's GPUs against its cap, and its directories' growth.

Pure drawing: the samples come in as plain values, a matplotlib Figure comes out. The object
API with the Agg canvas keeps pyplot's global state (and any display) out of a server process,
so charts can be drawn in worker threads.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, tzinfo

from matplotlib import dates as mdates
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from core.chart_specs import SizeSample, UsageSample
from core.notice_text import plural

# Colours are named so tests can find the cap line in the picture.
CAP_COLOUR = "#d62728"
LAB_COLOUR = "#1f77b4"
OVERCAP_COLOUR = "#ff7f0e"
SIZE_INCHES = (9.0, 4.5)
DPI = 100

KIB_UNITS = (("TiB", 1024**3), ("GiB", 1024**2), ("MiB", 1024), ("KiB", 1))


def lab_gpu_figure(
    lab: str,
    samples: Sequence[UsageSample],
    since: float,
    until: float,
    tz: tzinfo,
    gap_seconds: float,
) -> Figure:
    """GPUs in use (lab partition, then overcap on top) as steps, with the cap as a red line.

    Where no sample was taken for `gap_seconds` (skybot or Slurm was down) the lines break
    rather than pretending the last value held. The time axis starts at the first sample if
    that is later than `since`.
    """
    figure, ax = _figure()
    if samples and samples[0].at - gap_seconds > since:
        # History is younger than the window (skybot was installed recently): show what
        # there is rather than a week of empty axis with a sliver at the end.
        since = samples[0].at
    times, used, total, caps = _usage_steps(samples, until, gap_seconds, tz)
    if times:
        # matplotlib plots datetimes (its units registry); its stubs accept only numbers.
        ax.fill_between(times, 0, used, step="post", color=LAB_COLOUR, alpha=0.35, linewidth=0)  # type: ignore[arg-type]
        ax.step(times, used, where="post", color=LAB_COLOUR, label=f"GPUs in {lab}")  # type: ignore[arg-type]
        if any(s.overcap_gpus for s in samples):
            ax.step(
                times,  # type: ignore[arg-type]
                total,
                where="post",
                color=OVERCAP_COLOUR,
                label="with overcap (preemptible)",
            )
        if any(c == c for c in caps):  # NaN != NaN: is any cap known?
            ax.step(
                times,  # type: ignore[arg-type]
                caps,
                where="post",
                color=CAP_COLOUR,
                linestyle="--",
                linewidth=2,
                zorder=3,
                label=_cap_label(samples),
            )
        ax.legend(loc="upper left", fontsize="small", framealpha=0.9)
    else:
        _no_data(ax, "No GPU use recorded in this period")
    highest = max([s.gpus_used + s.overcap_gpus for s in samples] + _known_caps(samples) + [1])
    ax.set_ylim(0, highest + max(1, math.ceil(highest * 0.1)))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("GPUs")
    _time_axis(ax, since, until, tz)
    ax.set_title(f"{lab}: GPUs in use against the cap, {_period(since, until, tz)}")
    return figure


def directory_growth_figure(
    lab: str,
    series: Mapping[str, Sequence[SizeSample]],
    since: float,
    until: float,
    tz: tzinfo,
) -> Figure:
    """Each directory's size at each weekly report, one line per directory, biggest first."""
    figure, ax = _figure()
    largest = max((s.kib for samples in series.values() for s in samples), default=0)
    unit, per_unit = _unit_for(largest)
    for label, samples in series.items():
        if not samples:
            continue
        ax.plot(
            [_datetime(s.at, tz) for s in samples],  # type: ignore[arg-type]
            [s.kib / per_unit for s in samples],
            marker="o",
            label=label,
        )
    if series:
        ax.legend(loc="upper left", fontsize="small", framealpha=0.9)
    else:
        _no_data(ax, "No disk-usage.txt reports recorded in this period")
    ax.set_ylim(bottom=0)
    ax.set_ylabel(f"size ({unit})")
    _time_axis(ax, since, until, tz, xlabel="weekly disk-usage.txt reports")
    ax.set_title(f"{lab}: largest directories, {_period(since, until, tz)}")
    return figure


def png_bytes(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    FigureCanvasAgg(figure).print_png(buffer)
    return buffer.getvalue()


def _figure() -> tuple[Figure, Axes]:
    figure = Figure(figsize=SIZE_INCHES, dpi=DPI, layout="constrained")
    ax = figure.add_subplot()
    ax.grid(True, alpha=0.3)
    return figure, ax


def _usage_steps(
    samples: Sequence[UsageSample], until: float, gap_seconds: float, tz: tzinfo
) -> tuple[list[datetime], list[float], list[float], list[float]]:
    """Step-plot columns; a NaN row after each sample followed by a gap breaks the lines.

    A step holds its value until the next point, so a sample that repeats the previous one
    adds nothing: usage changes far less often than skybot polls, and dropping the repeats
    makes a week of 15 s polls a few hundred points instead of 40,320, with the same picture.
    """
    times: list[datetime] = []
    used: list[float] = []
    total: list[float] = []
    caps: list[float] = []
    nan = float("nan")
    shown: tuple[int, int, int | None] | None = None
    for i, sample in enumerate(samples):
        values = (sample.gpus_used, sample.gpus_used + sample.overcap_gpus, sample.cap)
        if values != shown:
            times.append(_datetime(sample.at, tz))
            used.append(values[0])
            total.append(values[1])
            caps.append(nan if sample.cap is None else sample.cap)
            shown = values
        next_at = samples[i + 1].at if i + 1 < len(samples) else until
        if next_at - sample.at > gap_seconds:
            # The last value holds for one poll interval, then the line stops.
            times.append(_datetime(min(next_at, sample.at + gap_seconds), tz))
            used.append(nan)
            total.append(nan)
            caps.append(nan)
            shown = None
    if samples and samples[-1].at + gap_seconds >= until:
        # Carry the newest value on to "now", so the latest poll shows as a step, not a dot.
        times.append(_datetime(until, tz))
        used.append(used[-1])
        total.append(total[-1])
        caps.append(caps[-1])
    return times, used, total, caps


def _known_caps(samples: Sequence[UsageSample]) -> list[int]:
    return [s.cap for s in samples if s.cap is not None]


def _cap_label(samples: Sequence[UsageSample]) -> str:
    caps = sorted(set(_known_caps(samples)))
    if len(caps) == 1:
        return f"cap ({plural(caps[0], 'GPU')})"
    return f"cap ({caps[0]} to {caps[-1]} GPUs)"


def _no_data(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center", color="grey")


def _time_axis(ax: Axes, since: float, until: float, tz: tzinfo, xlabel: str | None = None) -> None:
    ax.set_xlim(_datetime(since, tz), _datetime(until, tz))  # type: ignore[arg-type]
    locator = mdates.AutoDateLocator(tz=tz, minticks=4, maxticks=9)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=tz))
    zone = datetime.fromtimestamp(until, tz).tzname() or "local time"
    ax.set_xlabel(xlabel or f"time ({zone})")


def _period(since: float, until: float, tz: tzinfo) -> str:
    start, end = _datetime(since, tz), _datetime(until, tz)
    if until - since < 2 * 86400:
        return f"{start:%d %b %Y %H:%M} to {end:%H:%M}"
    return f"{start:%d %b} to {end:%d %b %Y}"


def _datetime(at: float, tz: tzinfo) -> datetime:
    return datetime.fromtimestamp(at, tz)


def _unit_for(kib: int) -> tuple[str, int]:
    for unit, size in KIB_UNITS:
        if kib >= size:
            return unit, size
    return "KiB", 1
