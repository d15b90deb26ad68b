"""One action per job at a time, in this process: the second of two asks gets the first's outcome.

Two Cancel clicks 10 ms apart (a double-click on the confirm dialog), or a click and
`/sky cancel`, each ran scancel: the second reached slurmctld while the job was completing, and
its error ("already completing") was the message the user was left with, although the job had
been cancelled. So every action on a job goes through `JobActions.perform`, keyed by its cluster
and the job as scancel names it (`nova`, `35_2`): job ids repeat across clusters, so the
same id on another cluster is another job:

- the same action on the same job while one runs joins it and answers with its outcome;
- a different action on that job waits its turn (and its caller's checks then see the result);
- an action asked to be remembered (cancel) is, once it took effect, for `remember_seconds`:
  the snapshot lists the job until the next poll, so a click in that window is answered with
  the outcome instead of a second scancel, and the Home tab shows the job as being cancelled.

Failures are not remembered: trying again may succeed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

# A job as actions are keyed: (its cluster's name, the job as scancel names it).
JobKey = tuple[str, str]
# Longer than any poll interval stretch (the snapshot shows the job gone well before).
REMEMBER_SECONDS = 600.0


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """What an action on a job did, in a sentence; `took_effect`: Slurm did it."""

    text: str
    took_effect: bool


@dataclass
class _Running:
    action: str
    outcome: asyncio.Future[ActionOutcome]


class JobActions:
    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        remember_seconds: float = REMEMBER_SECONDS,
    ) -> None:
        self._clock = clock
        self._remember_seconds = remember_seconds
        self._locks: dict[JobKey, asyncio.Lock] = {}
        # How many callers hold or wait for each job's lock: the lock goes when none do.
        self._waiting: dict[JobKey, int] = {}
        self._running: dict[JobKey, _Running] = {}
        self._done: dict[tuple[JobKey, str], tuple[ActionOutcome, float]] = {}

    async def perform(
        self,
        cluster: str,
        label: str,
        action: str,
        work: Callable[[], Awaitable[ActionOutcome]],
        *,
        remember: bool = False,
    ) -> ActionOutcome:
        """`work`'s outcome, or that of the same action on `cluster`'s job `label` already
        running or just done."""
        job = (cluster, label)
        running = self._running.get(job)
        if running is not None and running.action == action:
            return await asyncio.shield(running.outcome)
        self._waiting[job] = self._waiting.get(job, 0) + 1
        lock = self._locks.setdefault(job, asyncio.Lock())
        try:
            async with lock:
                done = self.recent(job, action)
                if done is not None:
                    return done
                return await self._run(job, action, work, remember)
        finally:
            self._waiting[job] -= 1
            if not self._waiting[job]:
                del self._waiting[job], self._locks[job]

    def recent(self, job: JobKey, action: str) -> ActionOutcome | None:
        """The outcome of `action` on `job` if it took effect within `remember_seconds`."""
        self._forget_old()
        done = self._done.get((job, action))
        return done[0] if done is not None else None

    def in_progress(self, cluster: str, label: str, action: str) -> bool:
        """`action` on `cluster`'s job `label` is running now or took effect a moment ago."""
        job = (cluster, label)
        running = self._running.get(job)
        return (running is not None and running.action == action) or bool(self.recent(job, action))

    async def _run(
        self, job: JobKey, action: str, work: Callable[[], Awaitable[ActionOutcome]], remember: bool
    ) -> ActionOutcome:
        outcome: asyncio.Future[ActionOutcome] = asyncio.get_running_loop().create_future()
        self._running[job] = _Running(action, outcome)
        try:
            result = await work()
        except asyncio.CancelledError:
            outcome.cancel()
            raise
        except Exception as error:
            outcome.set_exception(error)
            outcome.exception()  # those who joined get it raised; unjoined, it is not "lost"
            raise
        finally:
            del self._running[job]
        outcome.set_result(result)
        if remember and result.took_effect:
            self._done[(job, action)] = (result, self._clock())
        return result

    def _forget_old(self) -> None:
        horizon = self._clock() - self._remember_seconds
        for key in [k for k, (_, at) in self._done.items() if at < horizon]:
            del self._done[key]
