"""What reads one cluster, built one way for `skybot run` (bot/cluster_wing.py), the
console, `skybot poll` and the doctor: its snapshot cache, its Slurm poller reading through
the cluster's own source (its commands, or its slurmrestd) and its storage poller, each built
from the cluster's ClusterConfig and the sections all clusters share (core/shared_config.py),
never from a Config rewritten to look like the cluster's. Before, the console and
`skybot poll` built a poller of the default cluster's commands whatever the configuration said.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from bot.adoption import cluster_labs
from bot.config import Config, database_path
from core.cluster_config import ClusterConfig
from handlers.clusters import ClusterDesk, ClusterDesks
from scheduler.log_cluster import WORKING_FOR
from scheduler.slurm.poller import SlurmPoller
from scheduler.storage_poller import StoragePoller
from store.reader import SnapshotCache
from store.writer import StoreWriter


def snapshot_cache(config: Config, cluster: ClusterConfig) -> SnapshotCache:
    """The in-memory view of the store that commands answer from, for `cluster`: its views
    know it, so every button built from them names it."""
    return SnapshotCache(
        database_path(config),
        cluster,
        cluster.labs,
        cluster.slurm.overcap_account,
        cluster.slurm.overcap_partition,
        gpu_min_release=config.images.min_release,
    )


@dataclass
class ClusterReaders:
    """One cluster's reading side."""

    cluster: ClusterConfig
    cache: SnapshotCache
    poller: SlurmPoller
    storage: StoragePoller
    # Whether it is the default (first) cluster.
    default: bool

    async def poll(self, cycles: int = 1) -> bool:
        """Caps, limits and storage, then `cycles` Slurm polls; whether every one succeeded. What it
        logs names the cluster."""
        WORKING_FOR.set(self.cluster.name)
        caps, limits, storage = await asyncio.gather(
            self.poller.poll_caps(), self.poller.poll_limits(), self.storage.poll()
        )
        ok = caps and limits and storage
        for _ in range(cycles):
            ok = await self.poller.poll_jobs() and ok
        return ok

    async def close(self) -> None:
        await self.poller.close()
        self.cache.close()


def cluster_readers(config: Config, cluster: ClusterConfig, writer: StoreWriter) -> ClusterReaders:
    """`cluster`'s readers, its source as it configures it (the default cluster's [slurm] and
    labs are the top level's: what a caller replaced on a parsed config is what counts)."""
    default = cluster.name == config.default_cluster.name
    cluster = cluster_labs(config, cluster)
    return ClusterReaders(
        cluster,
        snapshot_cache(config, cluster),
        SlurmPoller(cluster, config, writer),
        StoragePoller(cluster, config, writer),
        default,
    )


def every_cluster(config: Config, writer: StoreWriter) -> list[ClusterReaders]:
    """Each configured cluster's readers, the default first."""
    return [cluster_readers(config, cluster, writer) for cluster in config.clusters]


async def poll_every_cluster(readers: Sequence[ClusterReaders], cycles: int = 1) -> list[bool]:
    """Every cluster polled at once, each through its own source: one cluster down delays
    the others by nothing; whether each succeeded, in order."""
    # Each in a task of its own, so each one's log lines name its cluster.
    return list(await asyncio.gather(*(r.poll(cycles) for r in readers)))


async def close_every(readers: Sequence[ClusterReaders]) -> None:
    for reader in readers:
        with contextlib.suppress(Exception):
            await reader.close()


def reading_desks(readers: Sequence[ClusterReaders]) -> ClusterDesks:
    """The clusters as the router chooses among them (`--cluster NAME`, a lab's name), each
    answering from its own snapshot; no services: the console only reads."""
    return ClusterDesks([ClusterDesk(r.cluster, r.cache.current) for r in readers])
