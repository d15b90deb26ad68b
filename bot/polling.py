"""What `skybot run` polls, how often, and what follows each poll: a list, so that another
cluster's polls are more entries (scheduler/schedule.py runs it). Each cluster's polls are
entries of their own, with their own failures and intervals: one cluster down stales no other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from bot.config import Config
from bot.metrics import Metrics
from core.cluster_config import ClusterConfig
from core.shared_config import SharedConfig
from scheduler.schedule import SLURM_POLL, AfterPoll, Pacing, PollHooks, PollJob, slurm_pacer
from scheduler.slurm.poller import PROBE_SECONDS, SlurmPoller
from scheduler.storage_poller import StoragePoller
from scheduler.watchers import Watchers
from store.writer import StoreWriter


def poll_name(kind: str, cluster: str, default: bool) -> str:
    """`slurm`, `caps`, `storage` for the default cluster (as they always were, in logs);
    `slurm@nova` and so on for the others."""
    return kind if default else f"{kind}@{cluster}"


def poll_kind(name: str) -> str:
    """What a poll reads (`slurm`, `caps`, `storage`, `slurm-probe`), from its name; the
    metrics label it so, beside its cluster."""
    return name.partition("@")[0]


# A poll whose run has taken this many times `stale_after_polls` intervals (plus its command
# timeout) is abandoned and started again inside the bot (scheduler/schedule.py); readiness
# calls it late after one time that.
STUCK_FACTOR = 2.0


def poll_jobs(
    cluster: ClusterConfig,
    shared: SharedConfig,
    slurm: SlurmPoller,
    storage: StoragePoller,
    refresh: AfterPoll,
    watchers: Watchers | None = None,
    *,
    default: bool = True,
) -> list[PollJob]:
    """What skybot polls of `cluster` and how often (its [slurm]; storage as all clusters).
    After each poll the cluster's snapshot cache is refreshed, then its watchers run (if
    given), so they see the snapshot just written."""
    after_slurm = () if watchers is None else (watchers.after_slurm_poll,)
    after_storage = () if watchers is None else (watchers.after_storage_poll,)
    after_limits = () if watchers is None else (watchers.after_limits_poll,)
    settings, stale_after = cluster.slurm, shared.metrics.stale_after_polls
    name = cluster.name
    return [
        PollJob(
            poll_name(SLURM_POLL, name, default),
            settings.poll_seconds,
            slurm.poll_jobs,
            (refresh, *after_slurm),
            # The poller plans its listings of pending jobs on the interval.
            pacing=Pacing(slurm_pacer(settings, stale_after), slurm.set_interval),
            cluster=name,
        ),
        # Between polls, "did any job change?", where the source can ask it for almost nothing;
        # on a yes the poll above is brought forward (SlurmPoller.on_change).
        PollJob(poll_name("slurm-probe", name, default), PROBE_SECONDS, slurm.probe, cluster=name),
        PollJob(
            poll_name("caps", name, default),
            settings.caps_poll_seconds,
            slurm.poll_caps,
            (refresh,),
            cluster=name,
        ),
        # Partitions, QOS and reservations: on the jobs' interval, apart from them so that a
        # failure of either leaves the other current.
        PollJob(
            poll_name("limits", name, default),
            settings.poll_seconds,
            slurm.poll_limits,
            (refresh, *after_limits),
            cluster=name,
        ),
        PollJob(
            poll_name("storage", name, default),
            shared.storage.poll_seconds,
            storage.poll,
            (refresh, *after_storage),
            cluster=name,
        ),
    ]


def poll_hooks(
    config: Config,
    metrics: Metrics,
    writer: StoreWriter,
    slurm: Sequence[SlurmPoller],
    polls: Sequence[PollJob] = (),
) -> PollHooks:
    async def close_pollers() -> None:
        # Every cluster's Slurm poll worker ends with the polls.
        await asyncio.gather(*(poller.close() for poller in slurm))

    # Each poll's figures carry its cluster (and its kind, without the `@cluster`).
    clusters = {job.name: job.cluster for job in polls}
    default = config.default_cluster.name

    def observe(name: str, seconds: float) -> None:
        metrics.observe_poll(poll_kind(name), clusters.get(name, default), seconds)

    def observe_interval(name: str, seconds: float) -> None:
        metrics.observe_poll_interval(poll_kind(name), clusters.get(name, default), seconds)

    return PollHooks(
        # The slowest cluster's command timeout: a poll is late only past its own grace.
        grace_seconds=max(c.slurm.command_timeout_seconds for c in config.clusters),
        observe=observe,
        observe_interval=observe_interval,
        after_each=writer.check_file,
        close_pollers=close_pollers,
    )
