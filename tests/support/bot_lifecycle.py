"""A `skybot run` process as systemd sees it: a config file for it, no bot outliving a test,
SIGTERM answered within STOP_SECONDS, and its /readyz."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import pytest

from tests.support.bot_process import free_port

# systemd's stop contract for the unit (TimeoutStopSec is longer; this is what we promise).
STOP_SECONDS = 10.0


def write_config(
    tmp_path: Path,
    *,
    metrics_port: int,
    database: Path | None = None,
    mode: str = "socket",
    http_port: int = 0,
    slurm: str = "",
) -> Path:
    """A config for the bot; without `slurm`, Slurm's commands are missing and polls fail."""
    database = database or tmp_path / "skybot.db"
    slurm = slurm or f'bin_dir = "{tmp_path}/no-slurm"\npoll_seconds = 60\n'
    config = tmp_path / f"skybot-{metrics_port}.toml"
    config.write_text(
        f'[slack]\nmode = "{mode}"\nhttp_port = {http_port or free_port()}\n'
        f"[slurm]\n{slurm}"
        f'[database]\npath = "{database}"\n'
        f'[metrics]\nport = {metrics_port}\nhost = "127.0.0.1"\n'
    )
    return config


@contextmanager
def running(process: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    """Whatever a test does, no bot outlives it."""
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


async def exit_code_after_sigterm(process: subprocess.Popen[bytes]) -> tuple[int, float]:
    """SIGTERM, then (exit code, seconds it took); fails if the bot outlives STOP_SECONDS."""
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        code = await asyncio.to_thread(process.wait, STOP_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"skybot run was still running {STOP_SECONDS:.0f} s after SIGTERM")
    return code, time.monotonic() - started


async def readiness(port: int) -> dict[str, object]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/readyz") as response,
    ):
        body: dict[str, object] = await response.json()
        return body
