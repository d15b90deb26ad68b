"""The controller's part of a poll: the jobs and nodes, read as cheaply as the cluster allows.

Where the source tells states apart from records (24.05+'s `squeue --only-job-state`), a poll
lists every job's state and fetches full records only for the jobs that are new or changed;
elsewhere it reads every record. The outputs go to files in the poll's spool directory,
which the poll worker digests.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from scheduler.slurm.commands import SlurmCommandError
from scheduler.slurm.pending_changes import PendingWatch
from scheduler.slurm.source import ClusterSource
from scheduler.slurm.wire import ChangedJobsRequest, Generation
from scheduler.slurm.worker import PollWorker

log = logging.getLogger(__name__)

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


class ControllerReads:
    """What each poll reads from the controller, and whether it can read states only."""

    def __init__(self, source: ClusterSource, worker: PollWorker, pending: PendingWatch) -> None:
        self._source = source
        self._worker = worker
        self._pending = pending
        # None until squeue has shown whether it knows --only-job-state (24.05+).
        self._states_only: bool | None = None
        self._polls_since_everything = 0

    async def outputs(self, spool: Path, started: float) -> Path | None:
        """squeue's and the nodes' output, in files. Where squeue has --only-job-state
        (24.05+), only every job's id and state: the path of that file, and when due the
        pending jobs' settings (before any record is read, so a change made while this poll
        runs is in the next listing); else every job's full record (None)."""
        nodes = self._source.nodes_into(spool / "nodes.json")
        if self._states_only is False:
            # Both finish before the poll does: one failing must not leave the other running
            # into the next poll. squeue's error first: it names the controller outage.
            answers = await asyncio.gather(
                self._source.jobs_into(spool / "squeue.json"), nodes, return_exceptions=True
            )
            for answer in answers:
                if isinstance(answer, BaseException):
                    raise answer
            return None
        states = spool / "states.json"
        listing = self._source.fetching.pending_listing
        list_now = listing and self._states_only is True and self._pending.listing_due()
        states_error, nodes_error, listing_error = await asyncio.gather(
            self._source.job_states_into(states),
            nodes,
            self._list_pending(spool, started) if list_now else asyncio.sleep(0),
            return_exceptions=True,
        )
        if states_error is None:
            if nodes_error is not None:
                raise nodes_error
            if listing_error is not None:
                raise listing_error  # not Slurm's answer (those _list_pending takes)
            if self._states_only is None and listing:
                # The first poll: the listing that later ones are compared with.
                await self._list_pending(spool, started)
            self._states_only = True
            return states
        await self._without_states(spool, states_error, nodes_error)
        return None

    async def changed(self, spool: Path) -> bool | None:
        """Whether any job changed since the last poll, by the cheapest question the source
        has: slurmrestd's update_time; else, where squeue reads states only (24.05+), whether
        the states listing differs from the last poll's (a job that ended and one that left
        the queue included, which a states comparison leaves to sacct); None if neither
        (22.05's commands: only a full poll can tell)."""
        told = await self._source.jobs_changed()
        if told is not None or not self._states_only:
            return told
        probe = spool / "probe-states.json"
        await self._source.job_states_into(probe)
        return not await asyncio.to_thread(_same_bytes, probe, spool / "states.json")

    async def _without_states(
        self, spool: Path, states_error: BaseException, nodes_error: BaseException | None
    ) -> None:
        """The states-only read failed: the outage, or a squeue that cannot do it."""
        # squeue's error first: it names the controller outage, as a full poll's does.
        if self._states_only or not isinstance(states_error, SlurmCommandError):
            raise states_error
        if nodes_error is not None:
            raise nodes_error
        # Not known yet: if the full read works, this squeue cannot do it (22.05 says
        # "unrecognized option"); if that fails too, the controller is down.
        await self._source.jobs_into(spool / "squeue.json")
        log.info("squeue --only-job-state failed, reading every record: %s", states_error)
        self._states_only = False

    async def _list_pending(self, spool: Path, started: float) -> None:
        """The pending jobs' settings (scheduler/slurm/pending_changes.py). If squeue fails
        only here, the poll goes on: such changes then wait for the next full read."""
        path = spool / "pending.txt"
        try:
            await self._source.pending_jobs_into(path)
            listing = await asyncio.to_thread(path.read_bytes)
        except SlurmCommandError as error:
            log.warning("listing pending jobs failed; their changes wait: %s", error)
            return
        # Hashing 100,000 lines holds the interpreter for a while: on a thread, the loop
        # still gets its turns.
        await asyncio.to_thread(self._pending.listed, started, listing)

    async def changed_records(
        self, spool: Path, states: Path, committed: Generation | None, jobs_listed: int
    ) -> tuple[Path, ...]:
        """The full records of the jobs that are new or changed state: one read each for up
        to the source's `by_id_max` of them, else in as few `--jobs=` lists as the command
        line allows (a source without lists: one whole read); every job's, every
        FULL_RECORDS_EVERY polls."""
        if committed is None or self._polls_since_everything >= FULL_RECORDS_EVERY:
            return await self._every_record(spool)
        self._polls_since_everything += 1
        job_ids = await self._worker.changed_jobs(
            ChangedJobsRequest(states, committed), DIGEST_TIMEOUT_SECONDS
        )
        fetching = self._source.fetching
        settings_changed = self._pending.to_fetch(job_ids)
        if len(settings_changed) > max(fetching.by_id_max, jobs_listed * EVERY_RECORD_SHARE):
            return await self._every_record(spool)
        job_ids += settings_changed
        if len(job_ids) <= fetching.by_id_max:
            return await self._records_one_by_one(spool, job_ids)
        if not fetching.id_lists:
            return await self._every_record(spool)
        paths = []
        for number, chunk in enumerate(_job_id_lists(job_ids)):
            path = spool / f"squeue-{number}.json"
            # The last list can hold a single id, which squeue asks for as one job.
            if await self._source.jobs_into(path, chunk):
                paths.append(path)
        return tuple(paths)

    async def _every_record(self, spool: Path) -> tuple[Path, ...]:
        self._polls_since_everything = 0
        # One plain read: `--jobs=` costs slurmctld a read of every job all the same
        # (sdiag), and 24.11's squeue filters by a long list slower than it prints
        # everything (benchmarks/controller_cost.py: 20,000 jobs, 16 s against 7 s).
        path = spool / "squeue.json"
        await self._source.jobs_into(path)
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
                if await self._source.jobs_into(path, job_id):
                    found[number] = path

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(ONE_BY_ONE_AT_ONCE, len(job_ids))):
                    group.create_task(fetch_until_done())
        except* SlurmCommandError as failed:
            # The first failure, as the one list fetch would have raised it.
            raise failed.exceptions[0] from None
        return tuple(found[number] for number in sorted(found))


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


def _same_bytes(path: Path, other: Path) -> bool:
    """The listing carries no time, so the same queue prints the same jobs list. What
    follows it (24.11's meta) is left out: slurmrestd names the client's connection there
    ("[127.0.0.1]:41234(fd:9)"), which differs between two answers of the same queue."""
    try:
        return _jobs_part(path.read_bytes()) == _jobs_part(other.read_bytes())
    except FileNotFoundError:
        return False


def _jobs_part(listing: bytes) -> bytes:
    # Job ids and state names hold no quote, so `"meta"` cannot start inside the list.
    return listing.partition(b'"meta"')[0]
