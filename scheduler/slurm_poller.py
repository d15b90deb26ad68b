"""The one Slurm poller: a constant number of controller RPCs per cycle, however many users ask.

Per cycle: `squeue --json` and the nodes (slurmctld), and `sacct --json` for jobs that
reached a final state since the last cycle (slurmdbd, not the controller), so a job that ends
and leaves squeue between two polls is still seen to end. Associations (lab caps) change rarely
and are read on their own, slower schedule.

Each Slurm generation's best source is used, found from what the commands print rather than
configured: nodes from `sinfo --json` while it lists nodes one by one (22.05), from
`scontrol show nodes --json` once sinfo is seen to group them (23.02+: a group carries its
first node's GPU totals); caps from `sacctmgr --json` where it exists, `--parsable2` where
it does not (22.05). sacct lists every run of a requeued job (`--duplicates`), so a
preemption that came and went between polls is still counted.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from core.associations import parse_associations, parse_associations_json
from core.config_schema import Config
from core.lab_usage import LabUsage
from core.records import LabCap
from scheduler.backoff import Backoff
from scheduler.pending_changes import PENDING_LISTING, PendingWatch
from scheduler.poll_digest import (
    ChangedJobsRequest,
    DigestRequest,
    Generation,
    LabLimits,
    PollDigest,
)
from scheduler.poll_worker import PollWorker, PollWorkerError
from scheduler.slurm_commands import (
    SlurmCommandError,
    run_slurm,
    run_slurm_into,
    run_slurm_json,
)
from store.caps_and_storage import save_caps
from store.history import save_lab_usage
from store.slurm_writes import history_start, save_slurm_changes
from store.snapshots import load_lab_limits, load_source_status, record_poll_failure
from store.writer import StoreWriter

log = logging.getLogger(__name__)

# After a long outage, do not replay more than this much history.
SACCT_MAX_LOOKBACK_SECONDS = 6 * 3600.0
# slurmctld sends each job's end to slurmdbd through a queue, in order, and sdiag shows that
# queue's length. Seen empty at some time, every job that ended before then is in what any
# later sacct reads; once such a sacct has answered, later windows start only this much
# before that time (clock skew between this host and Slurm's, sacct's whole seconds,
# slurmdbd's CommitDelay) rather than a whole `sacct_overlap_seconds` before the last poll.
# sdiag runs beside the poll's other commands, so a sacct later than it is the next poll's:
# after a mass end (20,000 jobs cancelled) two or three polls read them all, not every poll
# for five minutes (issue 26, item 11).
SACCT_CAUGHT_UP_MARGIN_SECONDS = 10.0
_DBD_QUEUE = re.compile(rb"^\s*DBD Agent queue size:\s*(\d+)\s*$", re.M)
# sacct's --endtime lies this far past the latest time skybot has seen: only jobs that ended
# by then exist, so a far end costs nothing, and a clock stepped back (or behind slurmdbd's)
# by up to this much still sees the jobs that end now.
SACCT_END_MARGIN_SECONDS = 24 * 3600.0
# RQ: the run `scontrol requeue` stopped (PR and NF are the runs preemption and node failure
# stopped), so a requeue is told with its cause and Slurm's times for that run.
SACCT_STATES = "BF,CA,CD,DL,F,NF,OOM,PR,RQ,TO"
# A digest of 100,000 jobs takes seconds; one that takes minutes is a stuck worker.
DIGEST_TIMEOUT_SECONDS = 120.0
# Where squeue tells states apart from records (24.05+), a job's record is fetched again
# when its state changes; a pending reason or start estimate can change without one, so
# every record is fetched again every this many polls.
FULL_RECORDS_EVERY = 20
_MAX_JOBS_ARGUMENT = 100_000
# 24.11's slurmctld answers a `--jobs=` list with a read of every job (REQUEST_JOB_INFO;
# squeue filters on the client), a single id with REQUEST_JOB_INFO_SINGLE and FED_INFO.
# benchmarks/controller_cost.py at 20,000 held jobs (sdiag): a list 51-56 ms however few it
# names, a single id 0.1-0.2 ms, so singles stay below one list up to hundreds of ids (and
# at any count from about 1,300 jobs in the queue). What bounds them is the bot's host: each
# is a squeue process of about 40 ms: with 5 the poll took 0.27 s (the list's: 0.34 s),
# with 50 0.9-1.1 s (0.4 s). Up to this many new or changed jobs are fetched one id at a
# time, which spares the controller nearly all of a quiet cluster's poll.
ONE_BY_ONE_MAX = 20
# Single fetches in flight at once: enough to wait on slurmctld in parallel, not a process
# per id on a small host.
ONE_BY_ONE_AT_ONCE = 4
# When the settings of more than this share of the queue changed (a partition going down
# changes every pending job's reason), one plain read of everything: a `--jobs=` list of
# all 20,000 jobs took 16 s where the plain read took 7 s (see _every_record).
EVERY_RECORD_SHARE = 0.5
# What squeue says, exiting 1, for an id slurmctld no longer holds: a job that ended and
# was purged (MinJobAge) between the states listing and its fetch. An answer, not an outage.
_UNKNOWN_JOB = "Invalid job id specified"

SINFO_NODES = ("sinfo", ["--json"])
SCONTROL_NODES = ("scontrol", ["show", "nodes", "--json"])
_ASSOCIATIONS = ["show", "associations", "format=account,user,grptres"]


class SlurmPoller:
    """Polls Slurm into the store; on failure keeps the last snapshot and backs off."""

    def __init__(
        self,
        config: Config,
        writer: StoreWriter,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._writer = writer
        self._clock = clock
        self._backoff = Backoff(base_seconds=config.slurm.poll_seconds)
        self._caps_backoff = Backoff(base_seconds=config.slurm.caps_poll_seconds)
        self._sacct_since: float | None = None
        self._sacct_floor = 0.0
        # When slurmctld's queue to slurmdbd was seen empty: the latest such time that a
        # later sacct has read past, and the latest not yet read past.
        self._dbd_caught_up: float | None = None
        self._dbd_empty_unread: float | None = None
        # The latest wall-clock time a poll started at: a step back does not go back on it.
        self._latest_now = 0.0
        self._nodes_source = SINFO_NODES
        # None until sacctmgr has shown whether it knows --json.
        self._sacctmgr_json: bool | None = None
        # Whether the last failed full poll was one a ping let through.
        self._struggling = False
        self._worker = PollWorker()
        # The poll the store last committed, which the worker diffs the next one against.
        self._committed: Generation | None = None
        self._spool_dir: Path | None = None
        # None until squeue has shown whether it knows --only-job-state (24.05+).
        self._states_only: bool | None = None
        self._polls_since_everything = 0
        self._pending = PendingWatch(
            config.slurm.pending_changes_seconds, config.slurm.poll_seconds, monotonic
        )
        # Jobs in the last committed poll: when most of them changed, one plain read is
        # cheaper than fetching them by id.
        self._jobs_listed = 0

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

    async def poll_jobs(self) -> bool:
        """One cycle of squeue + nodes + sacct. Returns whether the controller answered.

        The controller (squeue, nodes) and accounting (sacct, slurmdbd) fail independently:
        with slurmdbd down the snapshot stays current and only job ends wait, because the
        sacct window does not move until sacct answers again. The commands' output goes to
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
        since = await self._sacct_window_start(now)
        self._latest_now = max(self._latest_now, now)
        spool = self._spool()
        started = self._pending.begin_poll()
        controller, sacct, dbd_empty_at = await asyncio.gather(
            self._controller_outputs(spool, started),
            self._run_into(
                spool / "sacct.json",
                "sacct",
                [
                    "--json",
                    "--allusers",
                    "--duplicates",
                    f"--state={SACCT_STATES}",
                    f"--starttime={_slurm_time(since)}",
                    f"--endtime={_slurm_time(self._latest_now + SACCT_END_MARGIN_SECONDS)}",
                ],
            ),
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
            delay = self._backoff.failed(now)
            log.warning("slurm poll failed (next try in %.0f s): %s", delay, error)
            self._pending.failed()
            await self._writer.run(record_poll_failure, "slurm", str(error), now)
            self._struggling = probed
            return False
        self._struggling = False
        accounting_error = str(sacct) if sacct is not None else digest.accounting_error
        if accounting_error is not None:
            log.warning("sacct failed; job ends wait until it answers: %s", accounting_error)
            await self._writer.run(record_poll_failure, "accounting", accounting_error, now)
        for warning in digest.warnings:
            log.warning("slurm data: %s", warning)
        await self._writer.run(save_slurm_changes, digest.changes, now, accounting_error is None)
        self._committed = digest.generation
        self._jobs_listed = digest.jobs
        self._pending.committed(started)
        if accounting_error is None:
            self._sacct_since = now
        self._note_dbd_queue(dbd_empty_at, sacct_read=accounting_error is None)
        self._backoff.succeeded()
        if accounting_error is None and self._caps_backoff.failures:
            # sacctmgr asks the slurmdbd that just answered sacct: the caps are current again
            # one poll after accounting is, not when the caps back-off (up to 5 min) runs out.
            self._caps_backoff.succeeded()
            await self.poll_caps()
        await self._record_lab_usage(digest.usages, now)
        return True

    async def close(self) -> None:
        """Stop the poll worker and remove the command output files."""
        await self._worker.close()
        if self._spool_dir is not None:
            shutil.rmtree(self._spool_dir, ignore_errors=True)
            self._spool_dir = None

    async def _digest(self, spool: Path, sacct_answered: bool, states: Path | None) -> PollDigest:
        caps, members = await self._writer.run(load_lab_limits)
        limits = LabLimits(
            tuple((lab.name, lab.account) for lab in self._config.labs),
            caps,
            members,
            self._config.slurm.overcap_account,
        )
        squeue = (
            (spool / "squeue.json",)
            if states is None
            else await self._changed_records(spool, states)
        )
        request = DigestRequest(
            squeue=squeue,
            nodes=spool / "nodes.json",
            sacct=spool / "sacct.json" if sacct_answered else None,
            limits=limits,
            base=self._committed,
            states=states,
            nodes_command=self._nodes_source[0],
        )
        digest = await self._worker.digest(request, DIGEST_TIMEOUT_SECONDS)
        if digest.nodes_grouped:
            log.info("sinfo groups nodes (Slurm 23.02+): reading them from scontrol")
            self._nodes_source = SCONTROL_NODES
            await self._run_into(spool / "nodes.json", *self._nodes_source)
            request = replace(request, nodes_command=self._nodes_source[0])
            digest = await self._worker.digest(request, DIGEST_TIMEOUT_SECONDS)
        return digest

    async def _changed_records(self, spool: Path, states: Path) -> tuple[Path, ...]:
        """The full records of the jobs that are new or changed state: one squeue each for
        up to ONE_BY_ONE_MAX of them, else in as few `--jobs=` lists as the command line
        allows; every job's, every FULL_RECORDS_EVERY polls."""
        if self._committed is None or self._polls_since_everything >= FULL_RECORDS_EVERY:
            return await self._every_record(spool)
        self._polls_since_everything += 1
        job_ids = await self._worker.changed_jobs(
            ChangedJobsRequest(states, self._committed), DIGEST_TIMEOUT_SECONDS
        )
        settings_changed = self._pending.to_fetch(job_ids)
        if len(settings_changed) > max(ONE_BY_ONE_MAX, self._jobs_listed * EVERY_RECORD_SHARE):
            return await self._every_record(spool)
        job_ids += settings_changed
        if len(job_ids) <= ONE_BY_ONE_MAX:
            return await self._records_one_by_one(spool, job_ids)
        paths = []
        for number, chunk in enumerate(_job_id_lists(job_ids)):
            path = spool / f"squeue-{number}.json"
            # The last list can hold a single id, which squeue asks for as one job.
            if await self._records_into(path, chunk):
                paths.append(path)
        return tuple(paths)

    async def _every_record(self, spool: Path) -> tuple[Path, ...]:
        self._polls_since_everything = 0
        # One plain read: `--jobs=` costs slurmctld a read of every job all the same
        # (sdiag), and 24.11's squeue filters by a long list slower than it prints
        # everything (benchmarks/controller_cost.py: 20,000 jobs, 16 s against 7 s).
        path = spool / "squeue.json"
        await self._run_into(path, "squeue", ["--all", "--json"])
        return (path,)

    async def _records_one_by_one(self, spool: Path, job_ids: list[str]) -> tuple[Path, ...]:
        """Each job's (an array's: all its records) with its own `squeue --json --jobs=ID`,
        a few at a time; a job slurmctld no longer knows has no file, as if not listed now
        (the digest asks for it again if it is still listed next poll)."""
        pending = iter(enumerate(job_ids))
        found: dict[int, Path] = {}

        async def fetch_until_done() -> None:
            for number, job_id in pending:
                path = spool / f"squeue-{number}.json"
                if await self._records_into(path, job_id):
                    found[number] = path

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(ONE_BY_ONE_AT_ONCE, len(job_ids))):
                    group.create_task(fetch_until_done())
        except* SlurmCommandError as failed:
            # The first failure, as the one list fetch would have raised it.
            raise failed.exceptions[0] from None
        return tuple(found[number] for number in sorted(found))

    async def _records_into(self, path: Path, job_ids: str) -> bool:
        """`squeue --all --json --jobs=IDS` into `path`; False if squeue, asked for one id,
        says slurmctld holds no such job (for a list it leaves unknown ids out)."""
        try:
            # --all as in every other read: a job in a hidden partition is listed too.
            await self._run_into(path, "squeue", ["--all", "--json", f"--jobs={job_ids}"])
        except SlurmCommandError as error:
            if _UNKNOWN_JOB in error.stderr:
                return False
            raise
        return True

    async def _dbd_queue_empty_at(self) -> float | None:
        """When sdiag was asked, if slurmctld's queue of messages for slurmdbd was empty
        then; None if it was not, or sdiag did not say (the full look-back applies)."""
        asked = self._clock()
        try:
            shown = await run_slurm(
                self._config.slurm.bin_dir,
                "sdiag",
                [],
                self._config.slurm.command_timeout_seconds,
            )
        except SlurmCommandError as error:
            log.debug("sdiag did not answer (sacct looks back in full): %s", error)
            return None
        found = _DBD_QUEUE.search(shown)
        return asked if found is not None and int(found[1]) == 0 else None

    def _note_dbd_queue(self, empty_at: float | None, sacct_read: bool) -> None:
        """An empty queue seen by an earlier poll counts once this poll's sacct, which ran
        after it, has answered; this poll's counts after the next one's."""
        if sacct_read:
            if self._dbd_empty_unread is not None:
                self._dbd_caught_up = self._dbd_empty_unread
            self._dbd_empty_unread = empty_at
        elif empty_at is not None:
            self._dbd_empty_unread = empty_at

    async def _controller_outputs(self, spool: Path, started: float) -> Path | None:
        """squeue's and the nodes' output, in files. Where squeue has --only-job-state
        (24.05+), only every job's id and state: the path of that file, and when due the
        pending jobs' settings (before any record is read, so a change made while this poll
        runs is in the next listing); else every job's full record (None)."""
        nodes = self._run_into(spool / "nodes.json", *self._nodes_source)
        if self._states_only is False:
            await asyncio.gather(
                self._run_into(spool / "squeue.json", "squeue", ["--all", "--json"]), nodes
            )
            return None
        states = spool / "states.json"
        list_now = self._states_only is True and self._pending.listing_due()
        states_error, nodes_error, listing_error = await asyncio.gather(
            self._run_into(states, "squeue", ["--all", "--only-job-state", "--json"]),
            nodes,
            self._list_pending(spool, started) if list_now else asyncio.sleep(0),
            return_exceptions=True,
        )
        if states_error is None:
            if nodes_error is not None:
                raise nodes_error
            if listing_error is not None:
                raise listing_error  # not Slurm's answer (those _list_pending takes)
            if self._states_only is None:
                # The first poll: the listing that later ones are compared with.
                await self._list_pending(spool, started)
            self._states_only = True
            return states
        # squeue's error first: it names the controller outage, as a full poll's does.
        if self._states_only or not isinstance(states_error, SlurmCommandError):
            raise states_error
        if nodes_error is not None:
            raise nodes_error
        # Not known yet: if the full read works, this squeue cannot do it (22.05 says
        # "unrecognized option"); if that fails too, the controller is down.
        await self._run_into(spool / "squeue.json", "squeue", ["--all", "--json"])
        log.info("squeue --only-job-state failed, reading every record: %s", states_error)
        self._states_only = False
        return None

    async def _list_pending(self, spool: Path, started: float) -> None:
        """The pending jobs' settings (scheduler/pending_changes.py). If squeue fails only
        here, the poll goes on: such changes then wait for the next full read."""
        path = spool / "pending.txt"
        try:
            await self._run_into(path, "squeue", PENDING_LISTING)
            listing = await asyncio.to_thread(path.read_bytes)
        except SlurmCommandError as error:
            log.warning("listing pending jobs failed; their changes wait: %s", error)
            return
        # Hashing 100,000 lines holds the interpreter for a while: on a thread, the loop
        # still gets its turns.
        await asyncio.to_thread(self._pending.listed, started, listing)

    async def _run_into(self, path: Path, command: str, args: list[str]) -> None:
        # Truncating last poll's output on the loop froze it for 300 ms at 100,000 jobs (the
        # filesystem frees 600 MB of blocks): remove it on a thread instead.
        await asyncio.to_thread(path.unlink, missing_ok=True)
        with path.open("wb") as output:
            await run_slurm_into(
                output,
                self._config.slurm.bin_dir,
                command,
                args,
                self._config.slurm.command_timeout_seconds,
            )

    def _spool(self) -> Path:
        if self._spool_dir is None or not self._spool_dir.is_dir():
            self._spool_dir = Path(tempfile.mkdtemp(prefix="skybot-poll-"))
        return self._spool_dir

    async def _controller_answers_ping(self) -> bool:
        """While backing off, one `scontrol ping` per cycle (the cheapest controller RPC)
        tells whether the controller is back, so skybot is current again one poll after
        Slurm answers rather than when the back-off runs out."""
        try:
            out = await run_slurm(
                self._config.slurm.bin_dir,
                "scontrol",
                ["ping"],
                self._config.slurm.command_timeout_seconds,
            )
        except SlurmCommandError:
            return False
        return b"is UP" in out

    async def poll_caps(self) -> bool:
        now = self._clock()
        if self._caps_backoff.should_skip(now):
            return False
        try:
            caps, members, warnings = await self._associations()
        except SlurmCommandError as error:
            delay = self._caps_backoff.failed(now)
            log.warning("caps poll failed (next try in %.0f s): %s", delay, error)
            await self._writer.run(record_poll_failure, "caps", str(error), now)
            return False
        for warning in warnings:
            log.warning("slurm associations: %s", warning)
        await self._writer.run(save_caps, caps, members, now)
        self._caps_backoff.succeeded()
        return True

    async def _associations(self) -> tuple[list[LabCap], dict[str, set[str]], list[str]]:
        """Caps and members from sacctmgr: its JSON where it has one, else --parsable2."""
        bin_dir = self._config.slurm.bin_dir
        timeout = self._config.slurm.command_timeout_seconds
        if self._sacctmgr_json is not False:
            try:
                document = await run_slurm_json(
                    bin_dir, "sacctmgr", ["--json", *_ASSOCIATIONS], timeout
                )
            except SlurmCommandError as error:
                if self._sacctmgr_json or "unrecognized option '--json'" not in error.stderr:
                    raise
                log.info("sacctmgr has no --json (Slurm 22.05): reading --parsable2")
                self._sacctmgr_json = False
            else:
                self._sacctmgr_json = True
                return parse_associations_json(document)
        raw = await run_slurm(
            bin_dir, "sacctmgr", ["--parsable2", "--noheader", *_ASSOCIATIONS], timeout
        )
        return parse_associations(raw.decode(errors="replace"))

    async def _sacct_window_start(self, now: float) -> float:
        """From the last successful poll (a little before, for slurmdbd's lag: in full,
        unless slurmctld was seen to have sent slurmdbd every end), so that jobs that ended
        while skybot was down are still seen to end; never from before a brand-new store's
        first poll: history from before skybot was installed is nobody's news."""
        if self._sacct_since is None:
            # From when sacct last answered: job ends during an accounting outage that
            # skybot was restarted in are still found.
            accounting = await self._writer.run(load_source_status, "accounting")
            slurm = await self._writer.run(load_source_status, "slurm")
            self._sacct_since = accounting.taken_at or slurm.taken_at or now
            self._sacct_floor = await self._writer.run(history_start, now)
        # After the wall clock is stepped back, jobs end at times before the last poll's: the
        # window starts at whichever came first.
        start = min(self._sacct_since, now) - self._config.slurm.sacct_overlap_seconds
        if now < self._sacct_since:
            # The wall clock was stepped back: ends from now on carry times before those
            # seen empty, which say nothing of them any more.
            self._dbd_caught_up = self._dbd_empty_unread = None
        if self._dbd_caught_up is not None:
            # Every end before then was read by a sacct that answered.
            start = max(start, self._dbd_caught_up - SACCT_CAUGHT_UP_MARGIN_SECONDS)
        return max(start, min(self._sacct_floor, now), now - SACCT_MAX_LOOKBACK_SECONDS)

    async def _record_lab_usage(self, usages: list[LabUsage], now: float) -> None:
        await self._writer.run(
            save_lab_usage,
            usages,
            now,
            self._config.database.history_days,
            # A missed poll or two still counts; an outage does not.
            3 * self._config.slurm.poll_seconds,
        )


def _job_id_lists(job_ids: list[str]) -> list[str]:
    """`--jobs=` values of at most _MAX_JOBS_ARGUMENT characters (Linux refuses a single
    argument over 128 KiB)."""
    lists: list[str] = []
    current: list[str] = []
    length = 0
    for job_id in job_ids:
        text = job_id
        if current and length + len(text) + 1 > _MAX_JOBS_ARGUMENT:
            lists.append(",".join(current))
            current, length = [], 0
        current.append(text)
        length += len(text) + 1
    if current:
        lists.append(",".join(current))
    return lists


def _slurm_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%dT%H:%M:%S")
