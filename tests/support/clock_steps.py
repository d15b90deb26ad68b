"""Stepping the wall clock of one `skybot run` process: libfaketime, preloaded into the bot
(and what it starts), reads its offset from a control file on every call, so a test steps
the clock by writing the file. The monotonic clock stays real, as NTP leaves it."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def faketime_env(control: Path) -> dict[str, str]:
    """The environment that puts a process's wall clock under `control`'s say (deploy/
    dev-setup.sh installs libfaketime)."""
    assert LIBFAKETIME.exists(), "libfaketime is missing: run deploy/dev-setup.sh"
    return {
        "LD_PRELOAD": str(LIBFAKETIME),
        "FAKETIME_TIMESTAMP_FILE": str(control),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


def set_clock(control: Path, spec: str) -> None:
    """`+0` the real time, `-3600` an hour behind it, `@2026-12-07 08:59:58` that moment
    (and on from there)."""
    control.write_text(spec + "\n")


async def scrape(port: int) -> str:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        return await response.text()


def metric(text: str, name: str, labels: str = "") -> float | None:
    """One sample's value from the Prometheus text, e.g. metric(t, "x_count", 'source="slurm"')."""
    selector = re.escape(name + (f"{{{labels}}}" if labels else ""))
    match = re.search(rf"^{selector} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else None


def samples(text: str, name: str) -> list[float]:
    """Every sample of a metric (any labels)."""
    return [
        float(value)
        for value in re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE)
    ]
