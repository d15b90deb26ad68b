"""Which cluster a command, a click or a Home tab is about, for a bot that serves several.

Each configured cluster has its own desk: its ClusterConfig, its snapshot view (which knows
its cluster: every button built from it names it) and the services bound to it (its runner
and submission worker, with the whole configuration). A command picks
one by `--cluster NAME` anywhere in its text, else by a lab name among its words that belongs
to one cluster, else it is about the default (first) cluster. With one cluster nothing here
shows: answers read as they always have.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.cluster_config import ClusterConfig
from core.config_schema import Config
from core.runner_contract import RunnerReply
from core.slack_text import literal
from core.view import ClusterView
from handlers.services import Services


class UnknownCluster(Exception):
    """A command named a cluster this skybot does not serve: the message says which it does."""


def actions_refusal(cluster: ClusterConfig) -> str:
    """What a user hears when acting on a cluster skybot only reads. (A cluster's name is
    the admin's, and ClusterConfig allows it only letters, digits, '_', '.' and '-'.)"""
    name = cluster.name
    how = "through slurmrestd" if cluster.source == "slurmrestd" else "only"
    return (
        f"skybot reads {name} {how} and does not act there: use sbatch/scancel on "
        f"{name}'s login node."
    )


def refused_reply(cluster: ClusterConfig) -> RunnerReply:
    """The runner's reply for every action on a cluster whose `actions` are "none"."""
    return {"ok": False, "error": actions_refusal(cluster)}


@dataclass(frozen=True)
class ClusterDesk:
    """One cluster as handlers see it."""

    cluster: ClusterConfig
    view: Callable[[], ClusterView]
    services: Services | None = None

    @property
    def name(self) -> str:
        return self.cluster.name


class ClusterDesks:
    """Every cluster's desk, the default (first configured) one first."""

    def __init__(self, desks: Sequence[ClusterDesk]) -> None:
        if not desks:
            raise ValueError("a skybot serves at least one cluster")
        self._desks = tuple(desks)
        self._by_name = {desk.name.casefold(): desk for desk in desks}

    @property
    def default(self) -> ClusterDesk:
        return self._desks[0]

    @property
    def several(self) -> bool:
        return len(self._desks) > 1

    def all(self) -> tuple[ClusterDesk, ...]:
        return self._desks

    def named(self, name: str) -> ClusterDesk | None:
        return self._by_name.get(name.casefold())

    def names(self) -> str:
        return ", ".join(literal(desk.name) for desk in self._desks)

    def chosen(self, flag: str | None, words: Sequence[str]) -> ClusterDesk:
        """The desk `--cluster NAME` (flag) names, else the one cluster a lab among `words`
        belongs to, else the default. Raises UnknownCluster for a name no cluster has."""
        if flag is not None:
            desk = self.named(flag)
            if desk is None:
                raise UnknownCluster(
                    f"skybot serves no cluster called {literal(flag, 40)}. Its clusters: "
                    f"{self.names()}; pick one with `--cluster NAME`."
                )
            return desk
        if self.several:
            for word in words:
                owner = self._owner_of_lab(word)
                if owner is not None:
                    return owner
        return self.default

    def _owner_of_lab(self, word: str) -> ClusterDesk | None:
        wanted = word.casefold()
        for desk in self._desks:
            if any(lab.name.casefold() == wanted for lab in desk.cluster.labs):
                return desk
        return None


def single_desk(
    config: Config, view: Callable[[], ClusterView], services: Services | None
) -> ClusterDesks:
    """Today's one cluster as desks (the console, tests, a bot with one cluster)."""
    return ClusterDesks([ClusterDesk(config.default_cluster, view, services)])
