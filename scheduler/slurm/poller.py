"""The one Slurm poller: a constant number of controller RPCs per cycle, however many users ask.

Per cycle: the jobs and the nodes (slurmctld), and accounting's records of the jobs that
reached a final state since the last cycle (slurmdbd, not the controller), so a job that ends
and leaves squeue between two polls is still seen to end. Associations (lab caps) change rarely
and are read on their own, slower schedule.

Between those cycles, `probe` asks every PROBE_SECONDS whether any job changed, where the
source can ask that for almost nothing (slurmrestd's update_time; 24.05+'s states-only read),
and brings the cycle forward when one did, as soon as the last cycle's cost allows
(`max_poll_share`): a job's end is then told within a second or two instead of a poll later.

The poller decides what to read and when; its cluster's source reads it (a ClusterSource,
scheduler/slurm/source.py: the client commands or slurmrestd, as restd_source.py's
`source_for` picks), and the poll worker digests it (scheduler/slurm/worker.py).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.cluster_config import ClusterConfig
from core.shared_config import SharedConfig
from core.slurm_failure import Part, part_of
from scheduler.backoff import Backoff
from scheduler.slurm.commands import SlurmCommandError
from scheduler.slurm.job_reads import DIGEST_TIMEOUT_SECONDS, ControllerReads
from scheduler.slurm.pending_changes import PendingWatch
from scheduler.slurm.restd_source import source_for
from scheduler.slurm.sacct_window import SacctWindow
from scheduler.slurm.slurm_clock import SlurmClock
from scheduler.slurm.source import ClusterSource
from scheduler.slurm.wire import DigestRequest, Generation, LabLimits, PollDigest
from scheduler.slurm.worker import PollWorker, PollWorkerError
from store.caps_and_storage import save_caps, save_limits
from store.poll_save import PollDecisions, PollToSave, UsageHistory, save_poll
from store.snapshots import load_lab_limits, record_poll_failure
from store.writer import StoreWriter

log = logging.getLogger(__name__)

# How often `probe` asks whether a job changed.
PROBE_SECONDS = 1.0


class SlurmPoller:
    """Polls one cluster into the store; on failure keeps the last snapshot and backs off.

    `cluster` is the one it polls: its name keys everything it writes, its [slurm] paces it,
    its labs are what usage is counted for. `source` reads it (by default as the cluster says:
    its commands or its slurmrestd, restd_source.py's `source_for`)."""

    def __init__(
        self,
        cluster: ClusterConfig,
        shared: SharedConfig,
        writer: StoreWriter,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        source: ClusterSource | None = None,
    ) -> None:
        self.cluster = cluster.name
        self._settings = cluster.slurm
        self._labs = cluster.labs
        self._history_days = shared.database.history_days
        self._writer = writer
        self._clock = clock
        self._monotonic = monotonic
        self._source: ClusterSource = source or source_for(cluster)
        slurm = cluster.slurm
        self._backoff = Backoff(base_seconds=slurm.poll_seconds)
        self._caps_backoff = Backoff(base_seconds=slurm.caps_poll_seconds)
        self._limits_backoff = Backoff(base_seconds=slurm.poll_seconds)
        self._sacct = SacctWindow(writer, self.cluster, slurm.sacct_overlap_seconds)
        # The sacct window is in the controller's time, not this host's (slurm_clock.py).
        self._slurm_clock = SlurmClock(clock, monotonic)
        # Whether the last failed full poll was one a ping let through.
        self._struggling = False
        # The part of Slurm the current run of failed polls blames (None: the last poll
        # answered), and when that run began (monotonic): logged once per run, not per try.
        self._outage: Part | None = None
        self._outage_began = 0.0
        # The same for accounting (sacct), which fails on its own while the poll goes on.
        self._accounting_outage: Part | None = None
        self._worker = PollWorker()
        # The poll the store last committed, which the worker diffs the next one against.
        self._committed: Generation | None = None
        self._spool_dir: Path | None = None
        self._pending = PendingWatch(slurm.pending_changes_seconds, slurm.poll_seconds, monotonic)
        self._reads = ControllerReads(self._source, self._worker, self._pending)
        # Jobs in the last committed poll: when most of them changed, one plain read is
        # cheaper than fetching them by id.
        self._jobs_listed = 0
        # One poll or probe at a time: a probe during a poll would ask about a read in flight.
        self._busy = asyncio.Lock()
        # No probe brings a cycle forward before this (monotonic): the last one's cost over
        # max_poll_share after it started.
        self._next_cycle_at = 0.0
        # Nor does a probe come sooner after the last than its own cost allows (a states
        # listing of a huge queue is not free either).
        self._next_probe_at = 0.0
        # Called when a probe saw a change (the schedule's `poll_slurm_soon`).
        self.on_change: Callable[[], None] | None = None
        # What the poll's transitions decide, in its save (the watchers' job DMs).
        self.decisions: PollDecisions[Any] | None = None
        # The labs' caps and members as last saved (by `poll_caps`, the one writer of them;
        # read from the store once): the worker counts usage against them every poll.
        self._lab_limits: tuple[Mapping[str, int | None], Mapping[str, frozenset[str]]] | None
        self._lab_limits = None

    def set_interval(self, seconds: float) -> None:
        """The interval polls now run at (stretched while polls are expensive)."""
        self._pending.interval_seconds = seconds

    def mark_changed(self, job_id: str) -> None:
        """skybot itself just changed this job (cancel, move to overcap): the next poll
        fetches its record whatever its state says."""
        self._pending.mark_changed(job_id)

    @property
    def consecutive_failures(self) -> int:
        return self._backoff.failures

    async def probe(self) -> bool:
        """Whether a job changed since the committed poll, asked as cheaply as the source
        allows; on a change `on_change` is called. Not asked (False) during a poll, before
        the first, while polls fail (the back-off decides when to try again), before the last
        cycle's or the last probe's cost allows (`max_poll_share`), or where only a full poll
        can tell (22.05's commands)."""
        if (
            self._busy.locked()
            or self._committed is None
            or self._backoff.failures
            or self._monotonic() < max(self._next_cycle_at, self._next_probe_at)
        ):
            return False
        async with self._busy:
            started = self._monotonic()
            try:
                changed = await self._reads.changed(self._spool())
            except (SlurmCommandError, PollWorkerError) as error:
                log.debug("change probe failed; the next poll finds out: %s", error)
                return False
            finally:
                took = self._monotonic() - started
                self._next_probe_at = started + took / self._settings.max_poll_share
        if changed and self.on_change is not None:
            self.on_change()
        return bool(changed)

    async def poll_jobs(self) -> bool:
        """One cycle of jobs + nodes + accounting (see `_poll_jobs`), one at a time."""
        async with self._busy:
            started = self._monotonic()
            try:
                return await self._poll_jobs()
            finally:
                took = self._monotonic() - started
                self._next_cycle_at = started + took / self._settings.max_poll_share

    async def _poll_jobs(self) -> bool:
        """One cycle of jobs + nodes + accounting. Returns whether the controller answered.

        The controller (jobs, nodes) and accounting (sacct, slurmdbd) fail independently:
        with slurmdbd down the snapshot stays current and only job ends wait, because the
        sacct window does not move until sacct answers again. The reads' output goes to
        files that the poll worker digests, so nothing here holds the event loop for long.
        """
        now = self._clock()
        probed = False
        if self._backoff.should_skip(now):
            # A controller that answered a ping and then failed the full poll all the same
            # is struggling, not down: it gets the rest of the back-off, without even a ping.
            if self._struggling or not await self._controller_answers_ping():
                return False
            probed = True
        slurm_now = self._slurm_clock.now()
        start, end = await self._sacct.span(slurm_now)
        spool = self._spool()
        started = self._pending.begin_poll()
        controller, sacct, dbd_empty_at = await asyncio.gather(
            self._reads.outputs(spool, started),
            self._source.ended_jobs_into(spool / "sacct.json", start, end),
            self._dbd_queue_empty_at(),
            return_exceptions=True,
        )
        if isinstance(sacct, BaseException) and not isinstance(sacct, SlurmCommandError):
            raise sacct
        if isinstance(dbd_empty_at, BaseException):
            raise dbd_empty_at  # sdiag's own failures are None: this is a bug or a cancel
        try:
            if isinstance(controller, BaseException):
                raise controller
            digest = await self._digest(spool, sacct_answered=sacct is None, states=controller)
        except (SlurmCommandError, PollWorkerError) as error:
            await self._failed(now, error, probed)
            return False
        self._struggling = False
        self._answered_again()
        accounting_error = str(sacct) if sacct is not None else digest.accounting_error
        await self._commit(digest, now, started, accounting_error)
        if accounting_error is None:
            self._sacct.answered(slurm_now)
        self._sacct.note_dbd_queue(dbd_empty_at, sacct_read=accounting_error is None)
        self._backoff.succeeded()
        if accounting_error is None and self._caps_backoff.failures:
            # sacctmgr asks the slurmdbd that just answered sacct: the caps are current again
            # one poll after accounting is, not when the caps back-off (up to 5 min) runs out.
            self._caps_backoff.succeeded()
            await self.poll_caps()
        return True

    async def _failed(self, now: float, error: Exception, probed: bool) -> None:
        delay = self._backoff.failed(now)
        part = part_of(str(error))
        if part != self._outage:
            if self._outage is None:
                self._outage_began = self._monotonic()
            self._outage = part
            log.warning(
                "slurm poll of %s failed (next try in %.0f s; said once until it answers): %s",
                self.cluster,
                delay,
                error,
            )
        else:
            log.debug(
                "slurm poll of %s failed again (next try in %.0f s): %s", self.cluster, delay, error
            )
        self._pending.failed()
        await self._writer.run(record_poll_failure, self.cluster, "slurm", str(error), now)
        self._struggling = probed

    def _answered_again(self) -> None:
        if self._outage is not None:
            log.info(
                "slurm poll of %s answered again after %d failed tries over %.0f s",
                self.cluster,
                self._backoff.failures,
                self._monotonic() - self._outage_began,
            )
            self._outage = None

    async def _commit(
        self, digest: PollDigest, now: float, started: float, accounting_error: str | None
    ) -> None:
        """Write the poll's changes, the labs' usage and what they decide, in one writer call
        (store/poll_save.py); what sacct reported counts only if it could be read."""
        if accounting_error is not None:
            part = part_of(accounting_error)
            said = log.warning if part != self._accounting_outage else log.debug
            said(
                "sacct on %s failed; job ends wait until it answers: %s",
                self.cluster,
                accounting_error,
            )
            self._accounting_outage = part
        for warning in digest.warnings:
            log.warning("slurm data: %s", warning)
        history = UsageHistory(
            self._history_days,
            # A missed poll or two still counts; an outage does not.
            3 * self._settings.poll_seconds,
        )
        poll = PollToSave(digest.changes, now, accounting_error, digest.usages, history)
        then = self.decisions.deciding() if self.decisions is not None else None
        saved = await self._writer.run(save_poll, self.cluster, poll, then)
        if self.decisions is not None:
            self.decisions.decided(saved.decided)
        self._committed = digest.generation
        self._jobs_listed = digest.jobs
        self._pending.committed(started)
        if accounting_error is None and self._accounting_outage is not None:
            log.info("sacct on %s answered again: job ends are told again", self.cluster)
            self._accounting_outage = None

    async def close(self) -> None:
        """Stop the poll worker, let go of the source, and remove the command output files."""
        await self._worker.close()
        await self._source.close()
        if self._spool_dir is not None:
            shutil.rmtree(self._spool_dir, ignore_errors=True)
            self._spool_dir = None

    async def _digest(self, spool: Path, sacct_answered: bool, states: Path | None) -> PollDigest:
        if self._lab_limits is None:
            self._lab_limits = await self._writer.run(load_lab_limits, self.cluster)
        caps, members = self._lab_limits
        limits = LabLimits(
            tuple((lab.name, lab.account) for lab in self._labs),
            caps,
            members,
            self._settings.overcap_account,
        )
        squeue = (
            (spool / "squeue.json",)
            if states is None
            else await self._reads.changed_records(
                spool, states, self._committed, self._jobs_listed
            )
        )
        fetching = self._source.fetching
        request = DigestRequest(
            squeue=squeue,
            nodes=spool / "nodes.json",
            sacct=spool / "sacct.json" if sacct_answered else None,
            limits=limits,
            base=self._committed,
            states=states,
            nodes_command=self._source.nodes_command,
            jobs_command=fetching.command,
            # A whole read (one file, every job): its pending jobs' priorities, if wanted.
            priorities=fetching.priorities_from_jobs and squeue == (spool / "squeue.json",),
        )
        digest = await self._worker.digest(request, DIGEST_TIMEOUT_SECONDS)
        if digest.nodes_grouped:
            self._source.nodes_are_grouped()
            await self._source.nodes_into(spool / "nodes.json")
            request = replace(request, nodes_command=self._source.nodes_command)
            digest = await self._worker.digest(request, DIGEST_TIMEOUT_SECONDS)
        if digest.priorities is not None:
            self._source.priorities_read(digest.priorities)
        return digest

    async def _dbd_queue_empty_at(self) -> float | None:
        """When (in the controller's time) slurmctld's queue of messages for slurmdbd was
        seen empty; None if it was not, or the source did not say (sacct looks back in full).
        The answer's time also sets the Slurm clock that sacct windows are made from."""
        asked = self._monotonic()
        diag = await self._source.controller_diag()
        if diag.server_time is not None:
            self._slurm_clock.told(diag.server_time, asked, self._monotonic())
        if diag.dbd_queue_size != 0:
            return None
        return diag.server_time if diag.server_time is not None else self._slurm_clock.now()

    def _spool(self) -> Path:
        if self._spool_dir is None or not self._spool_dir.is_dir():
            self._spool_dir = Path(tempfile.mkdtemp(prefix="skybot-poll-"))
        return self._spool_dir

    async def _controller_answers_ping(self) -> bool:
        """While backing off, one ping per cycle (the cheapest controller RPC) tells
        whether the controller is back, so skybot is current again one poll after Slurm
        answers rather than when the back-off runs out."""
        return await self._source.answers_ping()

    async def poll_caps(self) -> bool:
        now = self._clock()
        if self._caps_backoff.should_skip(now):
            return False
        try:
            caps, members, warnings = await self._source.associations()
        except SlurmCommandError as error:
            delay = self._caps_backoff.failed(now)
            log.warning("caps poll failed (next try in %.0f s): %s", delay, error)
            await self._writer.run(record_poll_failure, self.cluster, "caps", str(error), now)
            return False
        for warning in warnings:
            log.warning("slurm associations: %s", warning)
        await self._writer.run(save_caps, self.cluster, caps, members, now)
        self._lab_limits = (
            {cap.account: cap.gpu_cap for cap in caps},
            {account: frozenset(users) for account, users in members.items()},
        )
        self._caps_backoff.succeeded()
        return True

    async def poll_limits(self) -> bool:
        """The partitions' and QOS' limits and the reservations (core/slurm_limits.py), on
        the jobs' interval: an admin's `scontrol update` shows in answers a poll later."""
        now = self._clock()
        if self._limits_backoff.should_skip(now):
            return False
        try:
            limits, warnings = await self._source.limits()
        except SlurmCommandError as error:
            delay = self._limits_backoff.failed(now)
            log.warning(
                "limits poll of %s failed (next try in %.0f s): %s", self.cluster, delay, error
            )
            await self._writer.run(record_poll_failure, self.cluster, "limits", str(error), now)
            return False
        for warning in warnings:
            log.warning("slurm limits of %s: %s", self.cluster, warning)
        await self._writer.run(save_limits, self.cluster, limits, now)
        self._limits_backoff.succeeded()
        return True
