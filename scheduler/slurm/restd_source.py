"""A cluster read through slurmrestd (scheduler/slurm/restd.py), as the poller reads any cluster.

The answers are written to the files the poller names, as the commands' output is, so the poll
worker digests them alike. What this source adds is `update_time`: `jobs_changed` asks the
controller whether anything changed since the last jobs document (22.05: HTTP 304; 24.x: an
empty list stamped 0), for 0.03-0.13 ms of slurmctld's time instead of a read of every job,
so the poller can ask every second and read only when something changed. When something did,
the answer is already the whole queue (update_time is the queue's, not a job's): it is kept for
the jobs read that follows rather than asked for twice. A periodic jobs read whose file is still
in place is asked with update_time too, and leaves it there when nothing changed.

It reads every record, never states only: on 24.x, jobs/state costs slurmctld 0.3 ms at 2,000
jobs against 0.03-0.05 ms for an unchanged update_time read, and a changed one has the records
in hand already (../shared/reference/slurmrestd-on-one-host.md, section 5).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from core.associations import parse_associations_json
from core.cluster_config import ClusterConfig
from core.controller_diag import NOT_SAID, ControllerDiag
from core.priority import PendingPriority, parse_jobs_priorities, pending_priorities
from core.slurm_limits import (
    SlurmLimits,
    parse_partitions_json,
    parse_qos_json,
    parse_reservations_json,
)
from scheduler.slurm.cli_source import CliSource
from scheduler.slurm.commands import SlurmCommandError
from scheduler.slurm.restd import RestdClient, RestdError
from scheduler.slurm.restd_identity import (
    SlurmConfFacts,
    say_what_the_user_sees,
    slurm_conf_facts,
)
from scheduler.slurm.restd_token import TokenFileError
from scheduler.slurm.source import Associations, ClusterSource, Limits

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
        # The pending jobs' priorities read from it, and which file (inode, mtime) that was.
        self._priorities: tuple[PendingPriority, ...] = ()
        self._priorities_from: tuple[int, int] | None = None

    async def close(self) -> None:
        await self._client.close()

    async def jobs_changed(self) -> bool:
        async with self._jobs_lock:
            if self._kept is not None or self._jobs_update_time is None:
                return True
            read = await _answer(self._client.jobs_raw(self._jobs_update_time))
            if read.body is None:
                return False
            self._kept, self._jobs_update_time = read.body, read.update_time
            return True

    async def jobs_into(self, path: Path, job_ids: str | None = None) -> bool:
        if job_ids is not None:
            # Only states-only polls fetch by id, and job_states_into refuses those.
            raise SlurmCommandError("slurmrestd: jobs are read whole, not by id")
        async with self._jobs_lock:
            await self._read_jobs_into(path)
        # After the read: slurmctld has counted the token's requests by then.
        await self._check_identity()
        return True

    async def _read_jobs_into(self, path: Path) -> None:
        body, self._kept = self._kept, None
        if body is None:
            in_place = self._jobs_file == path and path.exists()
            since = self._jobs_update_time if in_place else None
            read = await _answer(self._client.jobs_raw(since))
            self._jobs_update_time = read.update_time
            if read.body is None:
                return  # last time's file is the answer
            body = read.body
        self._jobs_file = None
        # As slurmrestd sent it: the poll worker decodes it, not the bot's event loop.
        await _write_file(path, body)
        self._jobs_file = path

    async def job_states_into(self, path: Path) -> None:
        raise SlurmCommandError(
            "slurmrestd: read whole, with update_time (cheaper for slurmctld than jobs/state)"
        )

    async def pending_jobs_into(self, path: Path) -> None:
        raise SlurmCommandError("slurmrestd: no pending listing (every record is read)")

    async def nodes_into(self, path: Path) -> None:
        # Whole, without update_time: 22.05 answers HTTP 500 "Unspecified error" once a node
        # changed after update_time while the partitions did not (it reads both with it), and
        # a whole read costs slurmctld about 0.3 ms.
        read = await _answer(self._client.nodes())
        assert read.document is not None
        await _write_file(path, read.document)

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
            await self._pending_priorities(),
        )
        return limits, []

    async def _pending_priorities(self) -> tuple[PendingPriority, ...]:
        """The pending jobs' priorities, from the jobs document the last jobs read wrote.
        slurmrestd has no pending-only listing, and a read of its own would dump the whole
        queue a second time each poll; this one costs slurmctld nothing and is decoded (its
        job ids, states and priorities only) on a thread, once per document. slurmrestd has
        no sprio: no factors or weights."""
        path = self._jobs_file
        if path is None:
            return ()

        def read() -> tuple[tuple[int, int], dict[int, int]] | None:
            try:
                with path.open("rb") as file:
                    stat = os.fstat(file.fileno())
                    key = (stat.st_ino, stat.st_mtime_ns)
                    if key == self._priorities_from:
                        return None
                    return key, parse_jobs_priorities(file.read())
            except FileNotFoundError:
                return None

        try:
            found = await asyncio.to_thread(read)
        except (OSError, msgspec.DecodeError) as error:
            log.warning("pending jobs' priorities unread (the jobs document): %s", error)
            return self._priorities
        if found is not None:
            self._priorities_from, priorities = found
            self._priorities = pending_priorities(priorities, {})
        return self._priorities


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
