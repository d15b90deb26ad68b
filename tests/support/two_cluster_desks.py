"""Two clusters in one config, skynet (the default, over Slurm's commands) and nova (over
slurmrestd), each with one lab; and a desk per cluster that answers from a fixed view."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.config_schema import Config, parse_config
from core.view import ClusterView
from handlers.clusters import ClusterDesk, ClusterDesks
from tests.support.factories import make_snapshot, make_view, node

LAB = {"partition": "p", "account": "a"}
TWO_CLUSTERS: dict[str, Any] = {
    "clusters": [
        {"name": "skynet", "labs": [{"name": "hoffman-lab", **LAB}]},
        {
            "name": "nova",
            "source": "slurmrestd",
            "url": "unix:/run/nova.sock",
            "token_file": "/etc/skybot/nova.jwt",
            "labs": [{"name": "kira-lab", **LAB}],
        },
    ]
}


def two_clusters() -> Config:
    return parse_config(TWO_CLUSTERS)


def desks_of(config: Config, gpus: dict[str, str]) -> ClusterDesks:
    """A desk per cluster whose one node has that cluster's GPU type."""
    desks = []
    for cluster in config.clusters:
        snapshot = make_snapshot(nodes=[node(f"{cluster.name}-1", gpus[cluster.name])])
        view = make_view(snapshot, cluster.labs, cluster)
        desks.append(ClusterDesk(cluster, constant_view(view)))
    return ClusterDesks(desks)


def constant_view(view: ClusterView) -> Callable[[], ClusterView]:
    return lambda: view
