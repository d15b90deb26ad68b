"""A cluster read through slurmrestd (scheduler/slurm/restd.py), as the poller reads any cluster.

The answers are written to the files the poller names, as the commands' output is, so the poll
worker digests them alike, and the bot's event loop never decodes a large one.

On 24.x (v0.0.40+) a poll reads as the CLI path reads 24.05+'s squeue: `jobs/state` (every
job's id and state) each poll and each second's change probe, `job/{id}` for each job whose
state changed, up to BY_ID_MAX of them, else one whole `jobs` read, streamed into its file,
which is also read every FULL_RECORDS_EVERY polls (scheduler/slurm/job_reads.py). A whole
read of 100,000 jobs is 680 MB, which the bot then never holds (its shape check alone held
the loop for a fifth of a second at 20,000 jobs). slurmrestd has no pending-settings
listing (pending_changes.py): a change that leaves a pending job pending waits for the next
whole read; and no sprio: the pending jobs' priorities come from the whole reads, found by
the poll worker.

22.05 and 23.02 have no `jobs/state`: their polls read every record whole, with
`update_time`, which a quiet cluster answers for 0.03-0.13 ms of slurmctld's time instead
of a read of every job, so the poller can ask every second and read only when something
changed. When something did, the answer is already the whole queue: it is kept for the jobs
read that follows rather than asked for twice. A periodic jobs read whose file is still in
place is asked with update_time too, and leaves it there when nothing changed.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from core.associations import parse_associations_json
from core.cluster_config import ClusterConfig
from core.controller_diag import NOT_SAID, ControllerDiag
from core.priority import PendingPriority, pending_priorities
from core.slurm_limits import (
    SlurmLimits,
    parse_partitions_json,
    parse_qos_json,
    parse_reservations_json,
)
from scheduler.slurm import restd_jobs
from scheduler.slurm.cli_source import CliSource
from scheduler.slurm.commands import SlurmCommandError
from scheduler.slurm.restd import RestdClient, RestdError
from scheduler.slurm.restd_identity import (
    SlurmConfFacts,
    say_what_the_user_sees,
    slurm_conf_facts,
)
from scheduler.slurm.restd_token import TokenFileError
from scheduler.slurm.source import Associations, ClusterSource, JobFetching, Limits

log = logging.getLogger(__name__)

T = TypeVar("T")

# What `sacct --state=BF,CA,CD,DL,F,NF,OOM,PR,RQ,TO` keeps (cli_source.SACCT_STATES): the
# accounting endpoint takes no state filter on 22.05, so the records are filtered here.
_ENDED_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REQUEUED",
        "TIMEOUT",
    }
)


# Changed jobs fetched one `job/{id}` each, at most: each costs slurmctld a single-job read
# (REQUEST_JOB_INFO_SINGLE, 0.1-0.2 ms at 20,000 jobs, benchmarks/controller_cost.py) and
# the bot one small HTTP answer, against a whole read's 51-56 ms and 140 MB at 20,000.
BY_ID_MAX = 200
_FETCHING = JobFetching(
    "slurmrestd jobs", BY_ID_MAX, id_lists=False, pending_listing=False, priorities_from_jobs=True
)


def source_for(cluster: ClusterConfig) -> ClusterSource:
    """How skybot reads `cluster`: its commands, or its slurmrestd."""
    timeout = cluster.slurm.command_timeout_seconds
    if cluster.source == "slurmrestd":
        facts = slurm_conf_facts(cluster.slurm_conf)
        client = RestdClient(
            cluster.url, cluster.token_file, timeout=timeout, privileged=facts.privileged
        )
        return RestdSource(client, facts)
    return CliSource(cluster.slurm.bin_dir, timeout, cluster.slurm_conf or None)


class RestdSource:
    """One cluster's slurmrestd as a ClusterSource."""

    nodes_command = "slurmrestd nodes"
    fetching = _FETCHING

    def __init__(self, client: RestdClient, facts: SlurmConfFacts | None = None) -> None:
        self._client = client
        self._facts = facts or SlurmConfFacts()
        # The token whose user was last looked up in accounting (restd_identity.py).
        self._identity_checked: str | None = None
        # A probe and a read must not interleave: a probe's answer kept after a newer read
        # would take the snapshot back in time.
        self._jobs_lock = asyncio.Lock()
        # The newest jobs document obtained (kept or written): what update_time asks against.
        self._jobs_update_time: int | None = None
        # A probe's answer that changed, for the next jobs read.
        self._kept: bytes | None = None
        # The jobs file last written, left in place when the controller says nothing changed.
        self._jobs_file: Path | None = None
        # The pending jobs' priorities in the last whole read (the poll worker's).
        self._priorities: tuple[PendingPriority, ...] = ()

    async def close(self) -> None:
        await self._client.close()

    async def _reads_states(self) -> bool:
        # Asked each time: the client asks the daemon its version again after an upgrade.
        return await _answer(restd_jobs.reads_states(self._client))

    async def jobs_changed(self) -> bool | None:
        if await self._reads_states():
            return None  # the poller compares jobs/state's answers
        async with self._jobs_lock:
            if self._kept is not None or self._jobs_update_time is None:
                return True
            read = await _answer(restd_jobs.changed_jobs(self._client, self._jobs_update_time))
            if read.body is None:
                return False
            self._kept, self._jobs_update_time = read.body, read.update_time
            return True

    async def jobs_into(self, path: Path, job_ids: str | None = None) -> bool:
        if job_ids is not None:
            # One id at a time: with more than BY_ID_MAX changed, job_reads reads whole.
            if "," in job_ids:
                raise SlurmCommandError("slurmrestd: jobs are fetched one id at a time")
            return await _answer(restd_jobs.job_into(self._client, path, job_ids))
        # One whole read at a time: a second waits for the first, and a read of 24.x
        # streams into the file as it arrives (the poll worker decodes it).
        async with self._jobs_lock:
            if await self._reads_states():
                await _answer(restd_jobs.whole_jobs_into(self._client, path))
            else:
                await self._read_jobs_into(path)
        # After the read: slurmctld has counted the token's requests by then.
        await self._check_identity()
        return True

    async def _read_jobs_into(self, path: Path) -> None:
        body, self._kept = self._kept, None
        if body is None:
            in_place = self._jobs_file == path and path.exists()
            since = self._jobs_update_time if in_place else None
            read = await _answer(restd_jobs.changed_jobs(self._client, since))
            self._jobs_update_time = read.update_time
            if read.body is None:
                return  # last time's file is the answer
            body = read.body
        self._jobs_file = None
        # As slurmrestd sent it: the poll worker decodes it, not the bot's event loop.
        await _write_file(path, body)
        self._jobs_file = path

    async def job_states_into(self, path: Path) -> None:
        if not await self._reads_states():
            raise SlurmCommandError(
                "slurmrestd before 24.x has no jobs/state: read whole, with update_time"
            )
        await _write_file(path, await _answer(restd_jobs.job_states(self._client)))
        # Every poll reads the states: a rotated token's user is looked up a poll after.
        await self._check_identity()

    async def pending_jobs_into(self, path: Path) -> None:
        raise SlurmCommandError("slurmrestd: no pending listing (every record is read)")

    async def nodes_into(self, path: Path) -> None:
        # Whole, without update_time: 22.05 answers HTTP 500 "Unspecified error" once a node
        # changed after update_time while the partitions did not (it reads both with it), and
        # a whole read costs slurmctld about 0.3 ms. Streamed into the file unread, as a
        # whole jobs read is: the poll worker decodes it, never the bot's event loop.
        await _answer(self._client.body("nodes", {}, sink=path))

    def nodes_are_grouped(self) -> None:
        # slurmrestd lists nodes one by one on every version; nothing to switch to.
        log.warning("slurmrestd's nodes document looked grouped; reading it as it is")

    async def ended_jobs_into(self, path: Path, start: float, end: float) -> None:
        document = await _answer(self._client.accounting_jobs(start, end))
        jobs = document.get("jobs")
        if isinstance(jobs, list):
            document["jobs"] = [job for job in jobs if _ended(job)]
        await _write_file(path, document)

    async def controller_diag(self) -> ControllerDiag:
        try:
            return await self._client.controller_diag()
        except RestdError as error:
            log.debug("slurmrestd's diag did not answer (sacct looks back in full): %s", error)
            return NOT_SAID

    async def answers_ping(self) -> bool:
        try:
            return await self._client.answers_ping()
        except RestdError:
            return False

    async def associations(self) -> Associations:
        return parse_associations_json(await _answer(self._client.associations()))

    async def _check_identity(self) -> None:
        """Once per token: warn if its user does not exist or sees only its own jobs. A
        token that cannot be read, or diag or accounting not answering, leaves it for the
        next poll (the reads themselves say what is wrong with the token)."""
        try:
            token = self._client.token.current()
        except TokenFileError:
            return
        if token.token == self._identity_checked or token.user in self._facts.privileged:
            return
        try:
            record = await self._client.accounting_user(token.user)
            rpc_users = await self._client.rpc_users()
        except RestdError as error:
            log.debug(
                "slurmrestd at %s: whose token, not told yet: %s", self._client.address, error
            )
            return
        self._identity_checked = token.token
        warning = say_what_the_user_sees(
            token.user, self._client.token.path, record, rpc_users, self._facts
        )
        if warning is not None:
            log.warning("slurmrestd at %s: %s", self._client.address, warning)
        else:
            log.info(
                "slurmrestd at %s: reading as %s (token in %s)",
                self._client.address,
                token.user,
                self._client.token.path,
            )

    async def limits(self) -> Limits:
        partitions, reservations, qos = await asyncio.gather(
            _answer(self._client.whole("slurm", "partitions")),
            _answer(self._client.whole("slurm", "reservations")),
            _answer(self._client.whole("slurmdb", "qos")),
        )
        limits = SlurmLimits(
            tuple(parse_partitions_json(partitions)),
            tuple(parse_qos_json(qos)),
            tuple(parse_reservations_json(reservations)),
            self._priorities,
        )
        return limits, []

    def priorities_read(self, priorities: Mapping[int, int]) -> None:
        """The pending jobs' priorities in the whole jobs read the poll worker just digested.
        slurmrestd has no pending-only listing, and a read of its own would dump the whole
        queue again; this costs slurmctld nothing. slurmrestd has no sprio: no factors or
        weights."""
        self._priorities = pending_priorities(dict(priorities), {})


async def _answer(call: Awaitable[T]) -> T:
    """slurmrestd's answer; its errors as the commands' are, which fail the poll alone."""
    try:
        return await call
    except RestdError as error:
        raise SlurmCommandError(str(error)) from None


async def _write_file(path: Path, document: dict[str, Any] | bytes) -> None:
    """Written beside and renamed over, so a digest never reads half a document; encoding
    a large queue holds the interpreter, so on a thread."""

    def write() -> None:
        partial = path.with_name(path.name + ".partial")
        encoded = document if isinstance(document, bytes) else msgspec.json.encode(document)
        partial.write_bytes(encoded)
        os.replace(partial, path)

    await asyncio.to_thread(write)


def _ended(job: object) -> bool:
    state = job.get("state") if isinstance(job, dict) else None
    current = state.get("current") if isinstance(state, dict) else None
    # 22.05 (v0.0.38): a name; 24.x: a list of flags, the base state first.
    names = current if isinstance(current, list) else [current]
    return any(name in _ENDED_STATES for name in names)
