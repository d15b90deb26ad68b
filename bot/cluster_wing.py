"""One cluster's part of `skybot run`: its reader, its snapshot, its watchers and its actions.

A bot serves every configured cluster with one wing each, built alike from the configuration
as seen from that cluster (handlers/clusters.py `cluster_scoped`). Wings share the store, the
outbox, the identity directory and the schedule; each has its own polls in that schedule, so
one cluster's outage fails only its own polls and stales only its own snapshot.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass

from bot.cluster_readers import cluster_readers
from bot.config import Config
from bot.polling import poll_jobs
from bot.runner_client import call_runner
from core.cluster_config import ClusterConfig
from core.runner_contract import RunnerCall, RunnerReply, RunnerRequest
from handlers.clusters import ClusterDesk, refused_reply
from handlers.identity import IdentityDirectory
from handlers.services import Services
from scheduler.schedule import PollJob, PollSchedule
from scheduler.slurm.own_actions import refreshing_runner
from scheduler.slurm.poller import SlurmPoller
from scheduler.submit_worker import SubmissionWorker
from scheduler.watchers import Watchers
from store.reader import SnapshotCache
from store.writer import StoreWriter


def runner_call(config: Config, timeout: float | None = None, named: str = "") -> RunnerCall:
    """The runner for `config`'s (default) cluster, or, for a cluster whose actions are
    "none", a refusal that says where to act instead. `named`: the name runner.toml knows a
    cluster besides the first by (its [clusters.NAME] table says where that one's Slurm
    is); the first cluster's is runner.toml's top level, as before clusters had names."""
    cluster = config.default_cluster

    async def call(user: str, request: RunnerRequest, /) -> RunnerReply:
        if not cluster.acts_through_runner:
            return refused_reply(cluster)
        return await call_runner(
            user,
            request,
            sudo=config.runner.sudo,
            runner=config.runner.path,
            timeout=config.runner.timeout_seconds if timeout is None else timeout,
            cluster=named,
        )

    return call


@dataclass
class ClusterWing:
    """What reads and answers for one cluster."""

    # The whole configuration as seen from this cluster (its `default_cluster`).
    config: Config
    cache: SnapshotCache
    poller: SlurmPoller
    # Its Slurm poll first, then its probe, caps and storage polls.
    polls: list[PollJob]
    # What the runner is told this cluster's name is ("" for the first cluster).
    named: str = ""
    services: Services | None = None

    @property
    def submissions(self) -> SubmissionWorker | None:
        worker = self.services.submissions if self.services is not None else None
        return worker if isinstance(worker, SubmissionWorker) else None

    @property
    def cluster(self) -> ClusterConfig:
        return self.config.default_cluster

    def desk(self) -> ClusterDesk:
        return ClusterDesk(self.cluster, self.cache.current, self.services)


async def build_wing(
    config: Config,
    cluster: ClusterConfig,
    writer: StoreWriter,
    identity: IdentityDirectory,
    wake_sender: Callable[[], None],
) -> ClusterWing:
    """`cluster`'s reader, snapshot, watchers and polls (its actions come with
    `bind_actions`, once the schedule they bring forward exists)."""
    # The readers the console, `skybot poll` and the doctor build too (cluster_readers.py).
    readers = cluster_readers(config, cluster, writer)
    name, default, scoped, cache = cluster.name, readers.default, readers.config, readers.cache
    await cache.refresh()
    # Reading a failed job's output gets its own, shorter deadline: the DM waits for it.
    tail_runner = runner_call(
        scoped,
        min(config.runner.timeout_seconds, config.notifications.log_tail_seconds),
        named="" if default else name,
    )
    watchers = Watchers(
        scoped, writer, identity, wake_sender, cache.current, tail_runner, cluster=name
    )
    poller = readers.poller
    polls = poll_jobs(
        scoped,
        poller,
        readers.storage,
        cache.refresh,
        watchers,
        # The default cluster's polls keep their old names (metrics, logs).
        default=default,
    )
    return ClusterWing(scoped, cache, poller, polls, named="" if default else name)


def bind_actions(
    wing: ClusterWing,
    schedule: PollSchedule,
    writer: StoreWriter,
    wake_sender: Callable[[], None],
    shared: Services,
) -> None:
    """The wing's runner, submission worker and services: `shared` (identity, store, chart
    queue, rate limiter, DMs, one action per job at a time) with this cluster's configuration,
    runner, worker and view."""
    poll_soon = functools.partial(schedule.poll_soon, wing.polls[0].name)
    wing.poller.on_change = poll_soon
    # A cancel or a move to overcap shows in the snapshot at once, not a poll or more later.
    runner = refreshing_runner(
        runner_call(wing.config, named=wing.named), wing.poller.mark_changed, poll_soon
    )
    wing.services = dataclasses.replace(
        shared,
        config=wing.config,
        runner=runner,
        submissions=SubmissionWorker(
            wing.config, writer, runner, wake_sender=wake_sender, cluster=wing.cluster.name
        ),
        view=wing.cache.current,
    )
