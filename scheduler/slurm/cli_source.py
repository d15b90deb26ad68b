"""A cluster read through its client commands (squeue, sinfo, scontrol, sacct, sdiag, sacctmgr).

Each Slurm generation's best command is used, found from what the commands print rather than
configured: nodes from `sinfo --json` while it lists nodes one by one (22.05), from
`scontrol show nodes --json` once sinfo is seen to group them (23.02+: a group carries its
first node's GPU totals); caps from `sacctmgr --json` where it exists, `--parsable2` where
it does not (22.05). sacct lists every run of a requeued job (`--duplicates`), so a
preemption that came and went between polls is still counted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

import msgspec

from core.associations import parse_associations, parse_associations_json
from core.controller_diag import NOT_SAID, ControllerDiag, diag_from_sdiag
from core.priority import (
    NOT_MULTIFACTOR,
    SPRIO_FORMAT,
    SQUEUE_FORMAT,
    PendingPriority,
    PriorityFactors,
    parse_sprio,
    parse_squeue_priorities,
    pending_priorities,
)
from core.slurm_limits import (
    SlurmLimits,
    parse_partitions_json,
    parse_qos_json,
    parse_reservations_json,
)
from core.slurm_limits_text import (
    QOS_FORMAT,
    parse_partitions_text,
    parse_qos_text,
    parse_reservations_text,
)
from scheduler.slurm import job_reads
from scheduler.slurm.commands import (
    SlurmCommandError,
    raise_reported_errors,
    run_slurm,
    run_slurm_into,
    run_slurm_json,
)
from scheduler.slurm.pending_changes import PENDING_LISTING
from scheduler.slurm.source import Associations, JobFetching, Limits

log = logging.getLogger(__name__)

# RQ: the run `scontrol requeue` stopped (PR and NF are the runs preemption and node failure
# stopped), so a requeue is told with its cause and Slurm's times for that run.
SACCT_STATES = "BF,CA,CD,DL,F,NF,OOM,PR,RQ,TO"
# What squeue says, exiting 1, for an id slurmctld no longer holds: a job that ended and
# was purged (MinJobAge) between the states listing and its fetch. An answer, not an outage.
_UNKNOWN_JOB = "Invalid job id specified"

SINFO_NODES = ("sinfo", ["--json"])
SCONTROL_NODES = ("scontrol", ["show", "nodes", "--json"])
_ASSOCIATIONS = ["show", "associations", "format=account,user,grptres"]


class CliSource:
    """The commands in `bin_dir`, each given `timeout` seconds, with the cluster's
    slurm.conf (`slurm_conf`; None: the bot's own SLURM_CONF, or Slurm's default)."""

    def __init__(self, bin_dir: str, timeout: float, slurm_conf: str | None = None) -> None:
        self._bin_dir = bin_dir
        self._timeout = timeout
        self._slurm_conf = slurm_conf
        self._nodes_source = SINFO_NODES
        # None until sacctmgr (scontrol) has shown whether it knows --json.
        self._sacctmgr_json: bool | None = None
        # The same for the limits' reads, by command (scontrol, sacctmgr).
        self._limits_json: dict[str, bool] = {}

    @property
    def fetching(self) -> JobFetching:
        # job_reads.ONE_BY_ONE_MAX says why; read each time (benchmarks/controller_cost.py
        # sets it).
        return JobFetching(
            "squeue",
            job_reads.ONE_BY_ONE_MAX,
            id_lists=True,
            pending_listing=True,
            priorities_from_jobs=False,
        )

    @property
    def nodes_command(self) -> str:
        return self._nodes_source[0]

    def priorities_read(self, priorities: Mapping[int, int]) -> None:
        # squeue lists the pending jobs' priorities on its own (`limits`).
        return None

    async def jobs_changed(self) -> bool | None:
        # No one-shot command passes the last update time to slurmctld.
        return None

    async def close(self) -> None:
        return None

    async def jobs_into(self, path: Path, job_ids: str | None = None) -> bool:
        # --all as in every read: a job in a hidden partition is listed too.
        if job_ids is None:
            await self._run_into(path, "squeue", ["--all", "--json"])
            return True
        try:
            await self._run_into(path, "squeue", ["--all", "--json", f"--jobs={job_ids}"])
        except SlurmCommandError as error:
            # For a list squeue leaves unknown ids out; for one id it fails.
            if _UNKNOWN_JOB in error.stderr:
                return False
            raise
        return True

    async def job_states_into(self, path: Path) -> None:
        await self._run_into(path, "squeue", ["--all", "--only-job-state", "--json"])

    async def pending_jobs_into(self, path: Path) -> None:
        await self._run_into(path, "squeue", PENDING_LISTING)

    async def nodes_into(self, path: Path) -> None:
        await self._run_into(path, *self._nodes_source)

    def nodes_are_grouped(self) -> None:
        log.info("sinfo groups nodes (Slurm 23.02+): reading them from scontrol")
        self._nodes_source = SCONTROL_NODES

    async def ended_jobs_into(self, path: Path, start: float, end: float) -> None:
        await self._run_into(
            path,
            "sacct",
            [
                "--json",
                "--allusers",
                "--duplicates",
                f"--state={SACCT_STATES}",
                f"--starttime={_slurm_time(start)}",
                f"--endtime={_slurm_time(end)}",
            ],
        )

    async def controller_diag(self) -> ControllerDiag:
        try:
            shown = await self._run("sdiag", [])
        except SlurmCommandError as error:
            log.debug("sdiag did not answer (sacct looks back in full): %s", error)
            return NOT_SAID
        return diag_from_sdiag(shown)

    async def answers_ping(self) -> bool:
        try:
            out = await self._run("scontrol", ["ping"])
        except SlurmCommandError:
            return False
        return b"is UP" in out

    async def associations(self) -> Associations:
        """Caps and members from sacctmgr: its JSON where it has one, else --parsable2."""
        if self._sacctmgr_json is not False:
            try:
                document = await run_slurm_json(
                    self._bin_dir,
                    "sacctmgr",
                    ["--json", *_ASSOCIATIONS],
                    self._timeout,
                    self._slurm_conf,
                )
            except SlurmCommandError as error:
                if self._sacctmgr_json or "unrecognized option '--json'" not in error.stderr:
                    raise
                log.info("sacctmgr has no --json (Slurm 22.05): reading --parsable2")
                self._sacctmgr_json = False
            else:
                self._sacctmgr_json = True
                return parse_associations_json(document)
        raw = await self._run("sacctmgr", ["--parsable2", "--noheader", *_ASSOCIATIONS])
        return parse_associations(raw.decode(errors="replace"))

    async def limits(self) -> Limits:
        """Partitions and reservations (scontrol) and QOS (sacctmgr): JSON where the
        command has it (23.02+), else 22.05's text."""
        partitions, reservations, qos = await asyncio.gather(
            self._json_or_text("scontrol", ["show", "partition"], ["--oneliner"]),
            self._json_or_text("scontrol", ["show", "reservation"], ["--oneliner"]),
            self._json_or_text("sacctmgr", ["show", "qos", QOS_FORMAT], ["-P", "-n"]),
        )
        warnings: list[str] = []
        if isinstance(partitions, dict):
            read_partitions = parse_partitions_json(partitions)
        else:
            read_partitions, found = parse_partitions_text(partitions)
            warnings += found
        if isinstance(reservations, dict):
            read_reservations = parse_reservations_json(reservations)
        else:
            read_reservations, found = parse_reservations_text(reservations)
            warnings += found
        if isinstance(qos, dict):
            read_qos = parse_qos_json(qos)
        else:
            read_qos, found = parse_qos_text(qos)
            warnings += found
        pending, weights = await self._priorities()
        limits = SlurmLimits(
            tuple(read_partitions), tuple(read_qos), tuple(read_reservations), pending, weights
        )
        return limits, warnings

    async def _priorities(self) -> tuple[tuple[PendingPriority, ...], PriorityFactors | None]:
        """The pending jobs' priorities (squeue), and their factors and the site's weights
        where priority/multifactor runs (sprio); a failing sprio costs only the factors."""
        listing = await self._run(
            "squeue", ["--all", "--noheader", "--states=PENDING", f"--format={SQUEUE_FORMAT}"]
        )
        priorities = parse_squeue_priorities(listing.decode(errors="replace"))
        if not priorities:
            return (), None
        try:
            factors, weighted = await asyncio.gather(
                self._run("sprio", ["--noheader", f"--format={SPRIO_FORMAT}"]),
                self._run("sprio", ["--weights", "--noheader", f"--format={SPRIO_FORMAT}"]),
            )
        except SlurmCommandError as error:
            if NOT_MULTIFACTOR not in error.stderr:
                log.warning("sprio failed (priorities without their factors): %s", error)
            return pending_priorities(priorities, {}), None
        weights, _ = parse_sprio(weighted.decode(errors="replace"))
        _, by_job = parse_sprio(factors.decode(errors="replace"))
        return pending_priorities(priorities, by_job), weights

    async def _json_or_text(
        self, command: str, args: list[str], text_args: list[str]
    ) -> dict[str, object] | str:
        """`command --json args` as a document, or (22.05, no --json) `command text_args
        args` as text; which one is learnt once per command."""
        known = self._limits_json.get(command)
        if known is not False:
            try:
                raw = await self._run(command, ["--json", *args])
            except SlurmCommandError as error:
                if known or "unrecognized option '--json'" not in error.stderr:
                    raise
                log.info("%s has no --json (Slurm 22.05): reading its text", command)
                self._limits_json[command] = False
            else:
                self._limits_json[command] = True
                try:
                    document = msgspec.json.decode(raw)
                except msgspec.DecodeError as decode_error:
                    raise SlurmCommandError(f"{command} printed no JSON: {decode_error}") from None
                if not isinstance(document, dict):
                    raise SlurmCommandError(f"{command} printed no JSON object")
                raise_reported_errors(command, document.get("errors"))
                return document
        return (await self._run(command, [*text_args, *args])).decode(errors="replace")

    async def _run(self, command: str, args: list[str]) -> bytes:
        return await run_slurm(self._bin_dir, command, args, self._timeout, self._slurm_conf)

    async def _run_into(self, path: Path, command: str, args: list[str]) -> None:
        # Truncating last poll's output on the loop froze it for 300 ms at 100,000 jobs (the
        # filesystem frees 600 MB of blocks): remove it on a thread instead.
        await asyncio.to_thread(path.unlink, missing_ok=True)
        with path.open("wb") as output:
            await run_slurm_into(
                output, self._bin_dir, command, args, self._timeout, self._slurm_conf
            )


def _slurm_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%dT%H:%M:%S")
