"""The poll worker outlives a bot killed with SIGKILL mid-poll, and then exits quietly (issue 40):
it used to write a BrokenPipeError traceback to the bot's log as it found its bot gone.

A real process stands for the bot: it starts the worker as the bot does (PollWorker), hands it
a poll to digest and kills itself with SIGKILL before the answer. The worker's stderr is the
"bot's" (a file here), as under systemd it is the journal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.cluster import wait_until

FIXTURES = Path(__file__).parent / "fixtures" / "slurm" / "v0.0.38"
ROOT = Path(__file__).parent.parent

# The "bot": starts the worker, asks for one digest, prints the worker's pid, dies by SIGKILL.
BOT = """
import asyncio, os, pickle, signal, sys
from pathlib import Path
from scheduler.slurm.wire import DigestRequest, LabLimits
from scheduler.slurm.worker import PollWorker, _LENGTH

async def main() -> None:
    folder = Path(sys.argv[1])
    worker = PollWorker()
    await worker.start()
    process = worker._process
    request = DigestRequest(
        squeue=(folder / "squeue.json",),
        nodes=folder / "nodes.json",
        sacct=None,
        limits=LabLimits((("hoffman-lab", "hoffman-lab"),), {"hoffman-lab": 4}, {}, "overcap"),
        base=None,
    )
    asked = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
    process.stdin.write(_LENGTH.pack(len(asked)) + asked)
    await process.stdin.drain()
    print(process.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie (reparented to an init that has not reaped it yet) has exited too.
    status = Path(f"/proc/{pid}/stat")
    try:
        return status.read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def test_a_worker_whose_bot_was_killed_exits_without_a_traceback(tmp_path: Path) -> None:
    folder = tmp_path / "poll"
    folder.mkdir()
    (folder / "squeue.json").write_text((FIXTURES / "squeue.json").read_text())
    (folder / "nodes.json").write_text((FIXTURES / "sinfo.json").read_text())
    json.loads((folder / "squeue.json").read_text())  # a whole document, as the poller writes
    stderr = tmp_path / "bot.log"
    with stderr.open("wb") as log:
        bot = subprocess.run(
            [sys.executable, "-c", BOT, str(folder)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=log,
            timeout=60,
            check=False,
        )
    assert bot.returncode == -9, bot
    worker = int(bot.stdout.split()[0])
    wait_until(lambda: _gone(worker), 30, "the orphaned worker to exit", 0.05)
    written = stderr.read_text(errors="replace")
    assert "Traceback" not in written and "BrokenPipeError" not in written, written
    assert "Exception ignored" not in written, written
