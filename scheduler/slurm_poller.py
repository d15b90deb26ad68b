"""The one Slurm poller: a constant number of controller RPCs per cycle, however many users ask.

Per cycle: `squeue --json` and `sinfo --json` (slurmctld), and `sacct --json` for jobs that
reached a final state since the last cycle (slurmdbd, not the controller), so a job that ends
and leaves squeue between two polls is still seen to end. Associations (lab caps) change rarely
and are read on their own, slower schedule.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime

from bot.config import Config
from core.associations import parse_associations
from core.lab_usage import lab_usage
from core.records import Job
from core.slurm_json import SlurmJsonError, parse_sacct, parse_sinfo, parse_squeue
from core.transitions import Transition
from scheduler.backoff import Backoff
from scheduler.slurm_commands import SlurmCommandError, run_slurm, run_slurm_json
from store.history import save_lab_usage
from store.snapshots import (
    history_start,
    load_lab_limits,
    load_source_status,
    record_poll_failure,
    save_caps,
    save_slurm_poll,
)
from store.writer import StoreWriter

log = logging.getLogger(__name__)

# sacct reports final states a little after the controller: re-read this much of the past.
SACCT_OVERLAP_SECONDS = 300.0
# After a long outage, do not replay more than this much history.
SACCT_MAX_LOOKBACK_SECONDS = 6 * 3600.0
SACCT_STATES = "BF,CA,CD,DL,F,NF,OOM,PR,TO"

TransitionListener = Callable[[list[Transition]], Awaitable[None]]


class SlurmPoller:
    """Polls Slurm into the store; on failure keeps the last snapshot and backs off."""

    def __init__(
        self,
        config: Config,
        writer: StoreWriter,
        clock: Callable[[], float] = time.time,
        on_transitions: TransitionListener | None = None,
    ) -> None:
        self._config = config
        self._writer = writer
        self._clock = clock
        self._on_transitions = on_transitions
        self._backoff = Backoff(base_seconds=config.slurm.poll_seconds)
        self._caps_backoff = Backoff(base_seconds=config.slurm.caps_poll_seconds)
        self._sacct_since: float | None = None
        self._sacct_floor = 0.0

    @property
    def consecutive_failures(self) -> int:
        return self._backoff.failures

    async def poll_jobs(self) -> bool:
        """One cycle of squeue + sinfo + sacct. Returns whether it succeeded."""
        now = self._clock()
        if self._backoff.should_skip(now):
            return False
        since = await self._sacct_window_start(now)
        try:
            squeue, sinfo, sacct = await asyncio.gather(
                self._json("squeue", ["--all", "--json"]),
                self._json("sinfo", ["--json"]),
                self._json(
                    "sacct",
                    [
                        "--json",
                        "--allusers",
                        f"--state={SACCT_STATES}",
                        f"--starttime={_slurm_time(since)}",
                        f"--endtime={_slurm_time(now + 60)}",
                    ],
                ),
            )
            live = parse_squeue(squeue)
            nodes = parse_sinfo(sinfo)
            accounted = parse_sacct(sacct)
        except (SlurmCommandError, SlurmJsonError) as error:
            delay = self._backoff.failed(now)
            log.warning("slurm poll failed (next try in %.0f s): %s", delay, error)
            await self._writer.run(record_poll_failure, "slurm", str(error), now)
            return False
        for warning in (*live.warnings, *nodes.warnings, *accounted.warnings):
            log.warning("slurm data: %s", warning)
        transitions = await self._writer.run(
            save_slurm_poll, live.records, accounted.records, nodes.records, now
        )
        self._sacct_since = now
        self._backoff.succeeded()
        await self._record_lab_usage(live.records, now)
        if transitions and self._on_transitions is not None:
            await self._on_transitions(transitions)
        return True

    async def poll_caps(self) -> bool:
        now = self._clock()
        if self._caps_backoff.should_skip(now):
            return False
        try:
            raw = await run_slurm(
                self._config.slurm.bin_dir,
                "sacctmgr",
                [
                    "--parsable2",
                    "--noheader",
                    "show",
                    "associations",
                    "format=account,user,grptres",
                ],
                self._config.slurm.command_timeout_seconds,
            )
        except SlurmCommandError as error:
            delay = self._caps_backoff.failed(now)
            log.warning("caps poll failed (next try in %.0f s): %s", delay, error)
            await self._writer.run(record_poll_failure, "caps", str(error), now)
            return False
        caps, members, warnings = parse_associations(raw.decode(errors="replace"))
        for warning in warnings:
            log.warning("slurm associations: %s", warning)
        await self._writer.run(save_caps, caps, members, now)
        self._caps_backoff.succeeded()
        return True

    async def _json(self, command: str, args: list[str]) -> object:
        return await run_slurm_json(
            self._config.slurm.bin_dir, command, args, self._config.slurm.command_timeout_seconds
        )

    async def _sacct_window_start(self, now: float) -> float:
        """From the last successful poll (a little before, for slurmdbd's lag), so that jobs
        that ended while skybot was down are still seen to end; never from before a brand-new
        store's first poll: history from before skybot was installed is nobody's news."""
        if self._sacct_since is None:
            status = await self._writer.run(load_source_status, "slurm")
            self._sacct_since = status.taken_at or now
            self._sacct_floor = await self._writer.run(history_start, now)
        start = self._sacct_since - SACCT_OVERLAP_SECONDS
        return max(start, self._sacct_floor, now - SACCT_MAX_LOOKBACK_SECONDS)

    async def _record_lab_usage(self, jobs: list[Job], now: float) -> None:
        caps, members = await self._writer.run(load_lab_limits)
        usages = [
            lab_usage(
                lab.name,
                lab.account,
                caps.get(lab.account),
                jobs,
                members.get(lab.account, ()),
                self._config.slurm.overcap_account,
            )
            for lab in self._config.labs
        ]
        await self._writer.run(
            save_lab_usage,
            usages,
            now,
            self._config.database.history_days,
            # A missed poll or two still counts; an outage does not.
            3 * self._config.slurm.poll_seconds,
        )


def _slurm_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%dT%H:%M:%S")
