"""Reading the end of failed jobs' output as their owners, before their DMs are decided.

The job notifier asks for the tails of the transitions it is about to announce and waits a
bounded time for them (`TailSettings.seconds`, plus a little for the runner to start): a
file that cannot be read in time, or at all, becomes a one-line reason in the DM, and the DM
goes out regardless. Nothing is stored: if skybot stops before the DMs are enqueued, the
transitions are still unprocessed and their tails are read again at the next start.

Each read goes through skybot-runner as the job's owner (`tail`), never as the bot: the
runner refuses files the owner does not own, symbolic links, FIFOs and devices itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from core.job_output import OutputTail, stderr_path, stdout_path, tail_bytes, tail_from_reply
from core.records import Job
from core.runner_contract import RunnerCall, tail_request

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TailSettings:
    lines: int
    seconds: float
    # At most this many jobs' output is read per batch of transitions (a failing array would
    # otherwise start hundreds of runners); the rest are announced without it.
    max_jobs: int = 20
    concurrency: int = 4

    @property
    def max_bytes(self) -> int:
        return tail_bytes(self.lines)


async def fetch_output_tails(
    runner: RunnerCall, jobs: Mapping[int, Job], settings: TailSettings
) -> dict[int, list[OutputTail]]:
    """The tails of each job's stderr (and stdout, when another file), by transition id."""
    gate = asyncio.Semaphore(settings.concurrency)
    chosen = dict(list(jobs.items())[: settings.max_jobs])
    tasks = {
        row_id: asyncio.create_task(_tails_of(runner, job, settings, gate))
        for row_id, job in chosen.items()
    }
    if not tasks:
        return {}
    # Each runner call has its own timeout; this bounds the whole batch behind the gate.
    await asyncio.wait(tasks.values(), timeout=settings.seconds * 2 + 1)
    tails: dict[int, list[OutputTail]] = {}
    for row_id, task in tasks.items():
        if task.done() and not task.cancelled() and task.exception() is None:
            tails[row_id] = task.result()
            continue
        if not task.done():
            task.cancel()
        else:
            log.error("reading job output failed", exc_info=task.exception())
        late = f"it could not be read within {settings.seconds:g} s"
        tails[row_id] = [OutputTail(path, error=late) for path in output_files(chosen[row_id])]
    return tails


def output_files(job: Job) -> list[str]:
    """stderr's file, then stdout's if it is another one."""
    err, out = stderr_path(job), stdout_path(job)
    return [err] if err == out else [err, out]


async def _tails_of(
    runner: RunnerCall, job: Job, settings: TailSettings, gate: asyncio.Semaphore
) -> list[OutputTail]:
    async with gate:
        return [await _tail(runner, job.user, path, settings) for path in output_files(job)]


async def _tail(runner: RunnerCall, user: str, path: str, settings: TailSettings) -> OutputTail:
    if not path.startswith("/"):
        return OutputTail(path, error="Slurm did not say which directory the job ran in")
    reply = await runner(user, tail_request(path, settings.lines, settings.max_bytes))
    return tail_from_reply(path, reply)
