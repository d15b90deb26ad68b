"""Running Slurm's client commands: they run at the poll worker's niceness, not the bot's.

No cluster: the commands are scripts in a temporary `bin_dir`.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from scheduler.slurm.commands import POLL_NICENESS, SlurmCommandError, run_slurm
from scheduler.slurm.worker import PollWorker
from tests.support.recorded_polls import _polls, _write
from tests.support.slurm_wrappers import write_wrappers

# Its own niceness, once the bot has set it (it polls, so the test does not depend on how
# soon after the start that happens; never set, it prints the bot's after 10 s).
_PRINTS_ITS_NICENESS = """#!/bin/sh
tries=0
while [ "$(ps -o ni= -p $$)" -eq "$1" ] && [ "$tries" -lt 100 ]; do
    sleep 0.1
    tries=$((tries + 1))
done
ps -o ni= -p $$
"""


def _niceness(pid: int | str = "self") -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[16])


def _expected() -> int:
    return min(19, os.getpriority(os.PRIO_PROCESS, 0) + POLL_NICENESS)


async def test_a_slurm_command_runs_at_the_poll_workers_niceness(tmp_path: Path) -> None:
    squeue = tmp_path / "squeue"
    squeue.write_text(_PRINTS_ITS_NICENESS)
    squeue.chmod(0o755)
    bots = os.getpriority(os.PRIO_PROCESS, 0)
    out = await run_slurm(str(tmp_path), "squeue", [str(bots)], timeout=60)
    assert int(out) == _expected() != bots


async def test_the_poll_worker_runs_at_the_same_niceness(tmp_path: Path) -> None:
    worker = PollWorker()
    try:
        # After an answer, the worker has set its niceness (at the start of its loop).
        await worker.digest(_write(tmp_path / "out", *_polls("v0.0.38")[0]), timeout=60)
        assert worker.pid is not None
        assert _niceness(worker.pid) == _expected()
    finally:
        await worker.close()


async def test_a_command_hanging_in_a_child_is_killed_with_its_child_at_the_timeout(
    tmp_path: Path,
) -> None:
    """A `bin_dir` wrapper whose real command hangs (here `sleep`, holding the pipes): the
    whole process group goes at the timeout, not the wrapper alone with the pipe left open
    until the child gives up on its own."""
    pid_file = tmp_path / "child.pid"
    write_wrappers(tmp_path, {"squeue": f"sleep 30 &\necho $! > {pid_file}\nwait"})
    started = time.monotonic()
    with pytest.raises(SlurmCommandError, match=r"squeue timed out after 0\.5 s"):
        await run_slurm(str(tmp_path), "squeue", [], timeout=0.5)
    assert time.monotonic() - started < 3.0
    child = int(pid_file.read_text())
    await asyncio.sleep(0.1)
    state = Path(f"/proc/{child}/stat")
    assert not state.exists() or state.read_text().split()[2] == "Z", "the child lives on"
