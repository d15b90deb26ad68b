"""Watchers: turn what the pollers stored into messages in the outbox, one module each.

They only read snapshots and transitions (the pollers are the one way data comes in) and
write just their own bookkeeping plus outbox rows, in one transaction per decision:

- job_dms: DMs about job ends and requeues, from job_transitions past a cursor, decided in
  the Slurm poll's own save where the poller asks (poll_dms.py);
- storage: hoarding pings and full-filesystem warnings for the alert channel;
- cap_waits: DMs to users whose jobs wait long behind their lab's GPU cap;
- gpu_watches: the one DM of each `/sky watch` that came true or expired;
- reservations: each maintenance reservation, once, in the alert channel.

Delivery is the sender's job (scheduler/outbox_sender.py); `Watchers`, the scheduler's
after-poll hooks, runs them and wakes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from core.cluster_config import ClusterConfig
from core.runner_contract import RunnerCall
from core.shared_config import SharedConfig, shown_name
from core.view import ClusterView
from scheduler.watchers.cap_waits import check_cap_waits
from scheduler.watchers.directory import LinkedDirectory
from scheduler.watchers.gpu_watches import check_gpu_watches
from scheduler.watchers.job_dms import process_transitions
from scheduler.watchers.poll_dms import PollDms
from scheduler.watchers.reservations import announce_reservations
from scheduler.watchers.storage import check_storage
from store.health import log_failure
from store.writer import StoreWriter

# process_transitions: the notifier's own loop, for a caller that saved a poll itself.
__all__ = ["Watchers", "process_transitions"]

log = logging.getLogger(__name__)


class Watchers:
    """The scheduler's after-poll hooks: run a watcher, wake the sender if it enqueued."""

    def __init__(
        self,
        cluster: ClusterConfig,
        shared: SharedConfig,
        writer: StoreWriter,
        identity: LinkedDirectory,
        wake_sender: Callable[[], None] | None = None,
        view: Callable[[], ClusterView] | None = None,
        runner: RunnerCall | None = None,
    ) -> None:
        # The cluster whose rows these watchers read; `view` must be that cluster's.
        self._cluster = cluster
        self.cluster = cluster.name
        # The name DMs say, only where skybot serves several clusters.
        self._shown = shown_name(shared, cluster)
        self._shared = shared
        self._writer = writer
        self._identity = identity
        self._wake = wake_sender
        self._view = view
        # The job DMs: given to the cluster's poller, decided in its save (bot/cluster_wing.py).
        self.poll_dms = PollDms(writer, identity, shared, cluster, runner, wake_sender)

    async def after_slurm_poll(self) -> int:
        try:
            added = await self.poll_dms.follow_up()
            if self._view is not None:
                added += await check_cap_waits(
                    self._writer, self._identity, self._shared, self._view(), self._cluster
                )
        except Exception:
            log_failure(log, "job notifier failed; the transitions stay queued for the next poll")
            return 0
        added += await self._gpu_watches()
        self._woken(added)
        return added

    async def _gpu_watches(self) -> int:
        """Its own guard: a failing watch check must not hold back job DMs, nor they it."""
        if self._view is None:
            return 0
        try:
            return await check_gpu_watches(
                self._writer, self._view(), self.cluster, shown=self._shown
            )
        except Exception:
            log.exception("GPU watch check failed; it will look again after the next poll")
            return 0

    async def after_limits_poll(self) -> int:
        """Maintenance reservations newly seen, announced once in the alert channel."""
        if self._view is None:
            return 0
        try:
            added = await announce_reservations(
                self._writer, self._shared, self._view(), self._cluster
            )
        except Exception:
            log_failure(log, "reservation announcer failed; it will look again after the next poll")
            return 0
        self._woken(added)
        return added

    async def after_storage_poll(self) -> int:
        try:
            snapshot = self._view().snapshot if self._view is not None else None
            added = await check_storage(
                self._writer, self._identity, self._shared, self._cluster, snapshot
            )
        except Exception:
            log_failure(log, "storage watcher failed; it will look again after the next poll")
            return 0
        self._woken(added)
        return added

    def _woken(self, added: int) -> None:
        if added and self._wake is not None:
            self._wake()
