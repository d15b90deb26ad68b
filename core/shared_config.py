"""The configuration as a part that serves one cluster reads it (pure).

A part of skybot that serves one cluster (its Slurm and storage pollers, its watchers, its
submission worker) is built from that cluster's ClusterConfig (name, source, [slurm], labs)
and `SharedConfig`: the sections every cluster shares. Not a whole `Config`: there `slurm`,
`labs`, `default_cluster` and `notifications.cluster_name` are the first cluster's, and a
part that read them as "mine" served the first cluster's settings on every other cluster.
mypy refuses them on a `SharedConfig`; a `Config` is one, so callers pass theirs.
"""

from __future__ import annotations

from typing import Protocol

from core.cluster_config import ClusterConfig
from core.config_schema import (
    DatabaseConfig,
    ImagesConfig,
    MetricsConfig,
    NotificationsConfig,
    SlackConfig,
    StorageConfig,
    SubmitConfig,
)


class SharedConfig(Protocol):
    """What every cluster shares: read-only sections, and the list of clusters (whose length
    says whether messages must name theirs)."""

    @property
    def slack(self) -> SlackConfig: ...

    @property
    def storage(self) -> StorageConfig: ...

    @property
    def database(self) -> DatabaseConfig: ...

    @property
    def submit(self) -> SubmitConfig: ...

    @property
    def metrics(self) -> MetricsConfig: ...

    @property
    def notifications(self) -> NotificationsConfig: ...

    @property
    def images(self) -> ImagesConfig: ...

    @property
    def clusters(self) -> tuple[ClusterConfig, ...]: ...


def shown_name(shared: SharedConfig, cluster: ClusterConfig) -> str:
    """`cluster`'s name as messages show it: only where skybot serves several, so a
    one-cluster site's messages read as they always have."""
    return cluster.name if len(shared.clusters) > 1 else ""


def preemptible_on(shared: SharedConfig, cluster: ClusterConfig) -> frozenset[str]:
    """Partitions of `cluster` whose requeues are preemptions: its overcap partition and
    those notifications.preemptible_partitions names."""
    named = shared.notifications.preemptible_partitions
    return frozenset({cluster.slurm.overcap_partition, *named})
