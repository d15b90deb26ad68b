"""Performing queued submissions through the runner, each at most once.

A submission is marked `submitting` before sbatch runs and carries a tag that the runner puts
in the job's comment. If skybot dies between sbatch and recording its answer, the submission
is found in `submitting` at start-up, and the worker looks for a job with that comment in what
the poller has seen since: found, it is recorded as submitted; not found, it is queued again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from core.config_schema import Config
from core.runner_contract import RunnerCall, submission_comment, submit_request
from core.slack_text import literal
from core.snapshot import SourceStatus
from store.health import log_failure
from store.outbox import OutboxMessage
from store.snapshots import load_source_status
from store.submissions import (
    Submission,
    claim_next,
    find_job_by_comment,
    finish,
    interrupted,
    requeue,
)
from store.writer import StoreWriter

log = logging.getLogger(__name__)

IDLE_SECONDS = 5.0


class SubmissionWorker:
    def __init__(
        self,
        config: Config,
        writer: StoreWriter,
        runner: RunnerCall,
        wake_sender: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._config = config
        self._writer = writer
        self._runner = runner
        self._wake_sender = wake_sender
        self._clock = clock
        self._wake = asyncio.Event()
        self._started_at = clock()

    def wake(self) -> None:
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.recover()
                while await self.perform_next():
                    pass
            except Exception:
                log_failure(log, "submission worker failed; retrying")
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_first(stop, self._wake), IDLE_SECONDS)

    async def recover(self) -> int:
        """Resolve submissions interrupted mid-sbatch; returns how many were resolved.

        Only once the poller has read Slurm after this worker started: before that, a missing
        job may just be one the snapshot has not caught up with.
        """
        stuck = await self._writer.run(interrupted)
        if not stuck:
            return 0
        status: SourceStatus = await self._writer.run(load_source_status, "slurm")
        if status.taken_at is None or status.taken_at <= self._started_at:
            return 0
        resolved = 0
        for submission in stuck:
            job_id = await self._writer.run(find_job_by_comment, submission_comment(submission.tag))
            if job_id is not None:
                log.info("submission #%d had reached Slurm as job %d", submission.id, job_id)
                await self._finish(submission, job_id=job_id)
            else:
                log.info("submission #%d never reached Slurm; queued again", submission.id)
                await self._writer.run(requeue, submission.id)
            resolved += 1
        return resolved

    async def perform_next(self) -> bool:
        submission = await self._writer.run(claim_next, self._clock())
        if submission is None:
            return False
        request = submit_request(
            script=submission.script,
            options=submission.options,
            roots=self._roots(),
            partitions=self._partitions(),
            tag=submission.tag,
        )
        reply = await self._runner(submission.cluster_user, request)
        if reply.get("ok") and isinstance(reply.get("job_id"), int):
            await self._finish(submission, job_id=reply["job_id"])
        else:
            await self._finish(submission, error=str(reply.get("error") or "unknown error"))
        return True

    async def _finish(
        self, submission: Submission, *, job_id: int | None = None, error: str | None = None
    ) -> None:
        report = OutboxMessage(
            key=f"submission:{submission.id}",
            target=submission.user_id,
            text=report_text(submission, job_id, error),
        )
        await self._writer.run(
            finish, submission, self._clock(), job_id=job_id, error=error, report=report
        )
        self._wake_sender()

    def _roots(self) -> list[str]:
        return [root for lab in self._config.labs for root in lab.storage_roots]

    def _partitions(self) -> list[str]:
        return submit_partitions(self._config)


def submit_partitions(config: Config) -> list[str]:
    """Partitions a chat submission may use: every lab's, the overcap one, and any extras."""
    names = [lab.partition for lab in config.labs]
    names += [config.slurm.overcap_partition, *config.submit.extra_partitions]
    return list(dict.fromkeys(names))


def report_text(submission: Submission, job_id: int | None, error: str | None) -> str:
    what = (
        f"{literal(submission.script)} (submission #{submission.id}, "
        f"as {literal(submission.cluster_user)})"
    )
    if job_id is not None:
        return (
            f"Submitted {what}: Slurm job *{job_id}*. `/sky jobs` shows it; skybot will DM "
            "you when it ends."
        )
    return f"Could not submit {what}: {literal(error)}"


async def _first(*events: asyncio.Event) -> None:
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
