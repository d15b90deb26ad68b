"""One cluster's part of `skybot run`: its reader, its snapshot, its watchers and its actions.

A bot serves every configured cluster with one wing each, built alike from that cluster's
ClusterConfig and the sections every cluster shares (core/shared_config.py: never the
first cluster's [slurm] or labs by mistake). Wings share the store, the
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


def runner_call(config: Config, cluster: ClusterConfig, timeout: float | None = None) -> RunnerCall:
    """The runner for `cluster`, or, for a cluster whose actions are "none", a refusal that
    says where to act instead. The runner is told the name of a cluster besides the first
    (runner.toml's [clusters.NAME] table says where that one's Slurm is); the first
    cluster's is runner.toml's top level, as before clusters had names."""
    named = "" if cluster.name == config.default_cluster.name else cluster.name

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

    cluster: ClusterConfig
    cache: SnapshotCache
    poller: SlurmPoller
    # What turns its polls into DMs (job ends and starts, cap waits, watches, storage).
    watchers: Watchers
    # Its Slurm poll first, then its probe, caps and storage polls.
    polls: list[PollJob]
    services: Services | None = None

    @property
    def submissions(self) -> SubmissionWorker | None:
        worker = self.services.submissions if self.services is not None else None
        return worker if isinstance(worker, SubmissionWorker) else None

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
    cluster, cache = readers.cluster, readers.cache
    await cache.refresh()
    # Reading a failed job's output gets its own, shorter deadline: the DM waits for it.
    tail_runner = runner_call(
        config,
        cluster,
        min(config.runner.timeout_seconds, config.notifications.log_tail_seconds),
    )
    watchers = Watchers(cluster, config, writer, identity, wake_sender, cache.current, tail_runner)
    poller = readers.poller
    # Job DMs are decided in the poll's own save: one writer call per poll (issue 41).
    poller.decisions = watchers.poll_dms
    polls = poll_jobs(
        cluster,
        config,
        poller,
        readers.storage,
        cache.refresh,
        watchers,
        # The default cluster's polls keep their old names (metrics, logs).
        default=readers.default,
    )
    return ClusterWing(cluster, cache, poller, watchers, polls)


def bind_actions(
    wing: ClusterWing,
    schedule: PollSchedule,
    writer: StoreWriter,
    wake_sender: Callable[[], None],
    shared: Services,
) -> None:
    """The wing's runner, submission worker and services: `shared` (the whole configuration,
    identity, store, chart queue, rate limiter, DMs, one action per job at a time) with this
    cluster's runner, worker and view (which knows its cluster)."""
    poll_soon = functools.partial(schedule.poll_soon, wing.polls[0].name)
    wing.poller.on_change = poll_soon
    # A cancel or a move to overcap shows in the snapshot at once, not a poll or more later.
    runner = refreshing_runner(
        runner_call(shared.config, wing.cluster), wing.poller.mark_changed, poll_soon
    )
    wing.services = dataclasses.replace(
        shared,
        runner=runner,
        submissions=SubmissionWorker(
            wing.cluster, shared.config, writer, runner, wake_sender=wake_sender
        ),
        view=wing.cache.current,
    )
