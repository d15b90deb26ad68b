"""How well an ended job used what it asked for, from sacct, and one line of advice (pure).

The figures are seff's and Princeton jobstats': CPU efficiency is TotalCPU (user + system
time of every step) over elapsed time x allocated CPUs; peak memory is the largest step's
MaxRSS summed over its tasks (sacct's TRESUsageInTot for `mem`), against the memory
allocated; time used is elapsed against the limit. GPU utilisation is shown only where the
site records it in Slurm (`gres/gpuutil` TRES, e.g. via a GPU accounting plugin); otherwise
nothing is said about GPUs rather than guessed.

sacct --json shapes: 22.05 (v0.0.38) has plain numbers, 23.02+ wraps them as
`{"set", "infinite", "number"}`; each step's usage is under `tres.requested` (Slurm's name
for TRESUsageIn) as `max`/`total` lists of `{"type", "name", "count"}`. Anything missing or
malformed leaves that figure out, never the DM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from core.notice_text import format_duration
from core.records import JobUsage

MIB = 1024**2
GIB = 1024**3


def usage_from_sacct(raw: Any) -> JobUsage | None:
    """The usage in one `sacct --json` job record (any version), or None if it has no
    elapsed time (never started)."""
    if not isinstance(raw, dict):
        return None
    time = _dict(raw.get("time"))
    elapsed = _number(time.get("elapsed"))
    if not elapsed or elapsed <= 0:
        return None
    allocated = _tres_counts(_dict(raw.get("tres")).get("allocated"))
    cpus = allocated.get(("cpu", ""))
    mem_mib = allocated.get(("mem", ""))
    steps = [s for s in raw.get("steps") or [] if isinstance(s, dict)]
    cpu_seconds = _step_cpu_seconds(steps)
    peak = _step_peak(steps, ("mem", ""), "total")
    util = _step_peak(steps, ("gres", "gpuutil"), "average")
    return JobUsage(
        elapsed_seconds=int(elapsed),
        cpus=int(cpus) if cpus else None,
        cpu_seconds=cpu_seconds,
        mem_requested_bytes=int(mem_mib * MIB) if mem_mib else None,
        mem_peak_bytes=int(peak) if peak is not None else None,
        time_limit_minutes=_limit_minutes(time.get("limit")),
        gpu_util_percent=float(util) if util is not None else None,
    )


@dataclass(frozen=True, slots=True)
class EfficiencyPolicy:
    min_seconds: float = 300.0
    # Below this CPU efficiency (with more than one CPU) the DM suggests fewer CPUs.
    low_cpu_fraction: float = 0.5
    # Memory: advice when the peak is under this fraction of the request (and the request is
    # at least `min_mem_advice_bytes`, so nobody is told to trim 1 GB).
    low_mem_fraction: float = 0.5
    min_mem_advice_bytes: int = 4 * GIB
    # Time: advice when the job used under this fraction of its limit (and ran to the end).
    low_time_fraction: float = 0.25


def efficiency_lines(usage: JobUsage, policy: EfficiencyPolicy, *, timed_out: bool) -> list[str]:
    """mrkdwn lines for a job-end DM: the figures, each with advice when far off; nothing for
    a job that ran shorter than `policy.min_seconds`."""
    if usage.elapsed_seconds < policy.min_seconds:
        return []
    lines: list[str] = []
    if usage.cpus and usage.cpu_seconds is not None:
        fraction = usage.cpu_seconds / (usage.elapsed_seconds * usage.cpus)
        line = f"CPU efficiency: {_percent(fraction)} of {usage.cpus} CPU{_s(usage.cpus)}"
        if usage.cpus > 1 and fraction < policy.low_cpu_fraction:
            busy = max(1, math.ceil(fraction * usage.cpus))
            line += f": it kept about {busy} busy, so `--cpus-per-task={busy}` would do"
        lines.append(line)
    if usage.mem_requested_bytes and usage.mem_peak_bytes is not None:
        asked, peak = usage.mem_requested_bytes, usage.mem_peak_bytes
        line = f"Peak memory: {format_gb(peak)} of {format_gb(asked)} requested"
        if asked >= policy.min_mem_advice_bytes and peak < asked * policy.low_mem_fraction:
            suggestion = suggested_mem(peak)
            line += (
                f": asked for {format_gb(asked)}, peaked at {format_gb(peak)}: "
                f"`--mem={suggestion}` would start sooner"
            )
        lines.append(line)
    if usage.time_limit_minutes:
        limit = usage.time_limit_minutes * 60
        fraction = usage.elapsed_seconds / limit
        line = (
            f"Time: {format_duration(usage.elapsed_seconds)} of its {format_duration(limit)} limit"
        )
        if not timed_out and fraction < policy.low_time_fraction and limit >= 2 * 3600:
            suggested = max(1, math.ceil(usage.elapsed_seconds * 2 / 3600))
            line += f": `--time={suggested}:00:00` would let it backfill sooner"
        lines.append(line)
    if usage.gpu_util_percent is not None:
        lines.append(f"GPU utilisation: {usage.gpu_util_percent:.0f} % on average")
    return lines


def suggested_mem(peak_bytes: int) -> str:
    """`--mem` for a job that peaked at `peak_bytes`: a quarter more, rounded up to a GB."""
    return f"{max(1, math.ceil(peak_bytes * 1.25 / GIB))}G"


def format_gb(count: int) -> str:
    if count >= 10 * GIB:
        return f"{count / GIB:.0f} GB"
    if count >= GIB:
        return f"{count / GIB:.1f} GB"
    return f"{count / MIB:.0f} MB"


def _percent(fraction: float) -> str:
    return f"{max(0.0, fraction) * 100:.0f} %"


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    """A plain number (22.05) or a set, finite 23.02+ number object."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _limit_minutes(value: Any) -> int | None:
    minutes = _number(value)
    # 22.05 writes an unlimited limit as a huge number (INFINITE = 0xffffffff).
    return int(minutes) if minutes and minutes < 0xFFFFFFFE else None


def _tres_counts(entries: Any) -> dict[tuple[str, str], float]:
    counts: dict[tuple[str, str], float] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        count = _number(entry.get("count"))
        kind, name = entry.get("type"), entry.get("name") or ""
        if isinstance(kind, str) and isinstance(name, str) and count is not None:
            counts[(kind, name)] = count
    return counts


def _step_cpu_seconds(steps: list[dict[str, Any]]) -> float | None:
    total = 0.0
    found = False
    for step in steps:
        cpu = _dict(_dict(step.get("time")).get("total"))
        seconds, micros = _number(cpu.get("seconds")), _number(cpu.get("microseconds"))
        if seconds is None and micros is None:
            continue
        found = True
        total += (seconds or 0.0) + (micros or 0.0) / 1e6
    return total if found else None


def _step_peak(steps: list[dict[str, Any]], key: tuple[str, str], which: str) -> float | None:
    values = [
        _tres_counts(_dict(_dict(step.get("tres")).get("requested")).get(which)).get(key)
        for step in steps
    ]
    present = [v for v in values if v is not None]
    return max(present) if present else None
