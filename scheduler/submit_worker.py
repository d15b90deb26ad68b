"""Performing queued submissions through the runner, each exactly once.

A submission is marked `submitting` before sbatch runs and carries a tag that the runner puts
in the job's comment and in its own record of the submission, which it holds locked from before
sbatch until sbatch's answer is written (bot/install_files/skybot_runner.py, "Exactly once").
A submission found in `submitting` (skybot restarted mid-sbatch, or the runner's answer did not
come) is settled by asking the runner (`submit-status`): while a runner may still submit it,
it waits; then the record, squeue and sacct say whether it reached Slurm. Only "absent" queues
it again, and a runner that resubmits a tag another one submitted returns that one's job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from core.cluster_config import ClusterConfig
from core.runner_contract import (
    RunnerCall,
    submission_comment,
    submit_request,
    submit_status_request,
)
from core.runner_replies import (
    NeverSubmitted,
    Refused,
    StillSubmitting,
    SubmitFailed,
    Submitted,
    decode_submit,
    decode_submit_status,
)
from core.shared_config import SharedConfig
from core.slack_text import literal
from scheduler.log_cluster import WORKING_FOR
from store.health import log_failure
from store.outbox import OutboxMessage
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
# How long a submission whose fate the runner cannot tell (sacct down, sudo refusing) is asked
# about before the user is told to look for it themselves; it is never submitted again blind.
UNSURE_GIVE_UP_SECONDS = 600.0


class SubmissionWorker:
    def __init__(
        self,
        cluster: ClusterConfig,
        shared: SharedConfig,
        writer: StoreWriter,
        runner: RunnerCall,
        wake_sender: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        # The cluster whose submissions this worker performs (its labs' storage roots and
        # partitions bound them); a bot with several clusters runs one worker for each.
        self.cluster = cluster.name
        self._where = cluster
        self._shared = shared
        self._writer = writer
        self._runner = runner
        self._wake_sender = wake_sender
        self._clock = clock
        self._wake = asyncio.Event()
        # Monotonic time each unsettled submission was first found impossible to settle.
        self._unsure_since: dict[int, float] = {}

    def wake(self) -> None:
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        WORKING_FOR.set(self.cluster)  # its log lines name its cluster
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
        """Settle submissions left in `submitting`; returns how many were settled."""
        stuck = await self._writer.run(interrupted, self.cluster)
        settled = 0
        for submission in stuck:
            settled += await self._settle(submission)
        return settled

    async def _settle(self, submission: Submission) -> bool:
        request = submit_status_request(submission.tag, submission.created_at)
        status = decode_submit_status(await self._runner(submission.cluster_user, request))
        if isinstance(status, StillSubmitting):
            log.info("submission #%d: a runner is still submitting it; waiting", submission.id)
            return False
        if isinstance(status, Submitted):
            log.info("submission #%d had reached Slurm as job %d", submission.id, status.job_id)
            await self._finish(submission, job_id=status.job_id)
        elif isinstance(status, SubmitFailed):
            await self._finish(submission, error=status.error)
        elif isinstance(status, NeverSubmitted):
            log.info("submission #%d never reached Slurm; queued again", submission.id)
            await self._writer.run(requeue, submission.id)
        else:
            return await self._unsure(submission, status)
        self._unsure_since.pop(submission.id, None)
        return True

    async def _unsure(self, submission: Submission, refused: Refused) -> bool:
        """The runner could not say: what the poller saw may, else wait, and in the end tell
        the user to look, rather than risk a second job."""
        job_id = await self._writer.run(
            find_job_by_comment, submission.cluster, submission_comment(submission.tag)
        )
        if job_id is not None:
            await self._finish(submission, job_id=job_id)
            return True
        error = refused.reason
        first = self._unsure_since.setdefault(submission.id, time.monotonic())
        if time.monotonic() - first < UNSURE_GIVE_UP_SECONDS:
            log.warning("submission #%d: cannot tell if it reached Slurm: %s", submission.id, error)
            return False
        self._unsure_since.pop(submission.id, None)
        await self._finish(
            submission,
            error=f"skybot could not find out whether it reached Slurm ({error}); check "
            "`squeue --me` and `sacct` before submitting it again.",
        )
        return True

    async def perform_next(self) -> bool:
        submission = await self._writer.run(claim_next, self.cluster, self._clock())
        if submission is None:
            return False
        request = submit_request(
            script=submission.script,
            options=submission.options,
            roots=self._roots(),
            partitions=self._partitions(),
            tag=submission.tag,
            script_text=submission.script_text,
        )
        reply = decode_submit(await self._runner(submission.cluster_user, request))
        if isinstance(reply, Submitted):
            await self._finish(submission, job_id=reply.job_id)
        elif reply.outcome_unknown:
            # Left in `submitting`: recover() asks the runner where it stands.
            log.warning("submission #%d: outcome unknown yet: %s", submission.id, reply.reason)
        else:
            await self._finish(submission, error=reply.reason)
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
        return [root for lab in self._where.labs for root in lab.storage_roots]

    def _partitions(self) -> list[str]:
        return submit_partitions(self._shared, self._where)


def submit_partitions(shared: SharedConfig, cluster: ClusterConfig) -> list[str]:
    """Partitions a chat submission on `cluster` may use: every one of its labs', its overcap
    one, and any extras."""
    names = [lab.partition for lab in cluster.labs]
    names += [cluster.slurm.overcap_partition, *shared.submit.extra_partitions]
    return list(dict.fromkeys(names))


def report_text(submission: Submission, job_id: int | None, error: str | None) -> str:
    # The job form's script has no file: it is named by the directory it runs in.
    name = literal(submission.script)
    named = f"the job form's script in {name}" if submission.script_text is not None else name
    what = f"{named} (submission #{submission.id}, as {literal(submission.cluster_user)})"
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
