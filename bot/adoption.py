"""Naming the rows an older skybot wrote without a cluster, before anything reads them.

Every opener that polls or answers (`skybot run`, `console`, `poll`) calls `adopt_rows`
first: storage rows go to each cluster whose labs' roots they lie on, everything else to the
default cluster (store/clusters.py). Idempotent, so every start may call it.
"""

from __future__ import annotations

import sqlite_utils

from core.cluster_config import ClusterConfig
from core.config_schema import Config
from store.clusters import adopt_storage_rows, adopt_unnamed_rows
from store.writer import StoreWriter


def cluster_labs(config: Config, cluster: ClusterConfig) -> ClusterConfig:
    """`cluster` as the bot serves it: the default cluster's [slurm] and labs are the top
    level's (what a caller replaced on a parsed config, tests and tools, is what counts:
    `Config.default_cluster`)."""
    default = config.default_cluster
    return default if cluster.name == default.name else cluster


def storage_roots(config: Config) -> dict[str, list[str]]:
    """Each cluster's storage roots, by its name."""
    return {
        cluster.name: [
            root for lab in cluster_labs(config, cluster).labs for root in lab.storage_roots
        ]
        for cluster in config.clusters
    }


def _adopt(db: sqlite_utils.Database, default: str, roots: dict[str, list[str]]) -> int:
    return adopt_storage_rows(db, roots) + adopt_unnamed_rows(db, default)


async def adopt_rows(config: Config, writer: StoreWriter) -> int:
    """Name every unnamed row (one transaction each step); how many were named."""
    return await writer.run(_adopt, config.default_cluster.name, storage_roots(config))
