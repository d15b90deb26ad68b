"""Indexes and derived figures over one snapshot, computed once and shared by every command.

A snapshot changes every poll interval while commands arrive many times a second, so lab usage
and per-user job lists are worked out lazily, once per snapshot, not once per command. Lab
usage usually comes with the snapshot, counted by the poll worker from the jobs it wrote; it is
counted here only where none fits (a snapshot from before the first poll, or counted for
another configuration).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from core.cluster_config import ClusterConfig, LabConfig
from core.images import GUIDE_MIN_RELEASE
from core.lab_usage import IdleGpus, LabUsage, idle_by_type, idle_gpus, usage_of_labs
from core.records import Job
from core.snapshot import ClusterSnapshot

T = TypeVar("T")


# What a view works out from the snapshot's nodes alone.
_FROM_NODES = ("idle", "idle_by_type")


@dataclass
class ClusterView:
    snapshot: ClusterSnapshot
    labs: tuple[LabConfig, ...]
    overcap_account: str = "overcap"
    overcap_partition: str = "overcap"
    # GPU type -> oldest container release that runs on it (config images.min_release).
    gpu_min_release: Mapping[str, str] = field(default_factory=lambda: dict(GUIDE_MIN_RELEASE))
    # The cluster this is a view of: its name goes into every button built from the view,
    # and what it allows (actions through the runner) decides which are offered. None: a
    # view that names no cluster (tests, tools), read as the bot's default one.
    cluster: ClusterConfig | None = None
    _usage: dict[str, LabUsage] = field(default_factory=dict, repr=False)
    _memo: dict[Hashable, Any] = field(default_factory=dict, repr=False)

    @property
    def cluster_name(self) -> str:
        """The name this view's buttons and keys carry ("" for a view that names none)."""
        return self.cluster.name if self.cluster is not None else ""

    @property
    def acts(self) -> bool:
        """Whether skybot acts on this cluster (cancel, move, read output) as its users."""
        return self.cluster is None or self.cluster.acts_through_runner

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()` once per snapshot: answers that depend only on the snapshot are shared
        by every command until the next poll."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]  # type: ignore[no-any-return]

    def warm(self, previous: ClusterView | None = None) -> ClusterView:
        """Compute what most commands read, so that at 100,000 jobs the first command after
        a poll does not pay for it inside its answer (the cache calls this off the loop).

        What `previous` worked out from the same nodes (the very tuple: a reader keeps it
        while no node row changes) is taken over, not worked out again: at 10,000 nodes
        the idle list is 26 ms of the interpreter, every poll, for nothing."""
        if previous is not None and previous.snapshot.nodes is self.snapshot.nodes:
            # A cached_property keeps its value in the instance's __dict__, by its name.
            for name in _FROM_NODES:
                if name in previous.__dict__:
                    self.__dict__[name] = previous.__dict__[name]
        for lab in self.labs:
            self.usage(lab)
        for name in ("jobs_by_id", "jobs_by_user", "idle", "idle_by_type"):
            getattr(self, name)
        return self

    @cached_property
    def jobs_by_id(self) -> dict[int, Job]:
        return {job.job_id: job for job in self.snapshot.jobs}

    @cached_property
    def jobs_by_user(self) -> dict[str, list[Job]]:
        by_user: dict[str, list[Job]] = defaultdict(list)
        for job in self.snapshot.jobs:
            by_user[job.user].append(job)
        return dict(by_user)

    @cached_property
    def idle(self) -> list[IdleGpus]:
        return idle_gpus(self.snapshot.nodes)

    @cached_property
    def idle_by_type(self) -> dict[str, int]:
        return idle_by_type(self.idle)

    def lab(self, name: str) -> LabConfig | None:
        wanted = name.casefold()
        return next((lab for lab in self.labs if lab.name.casefold() == wanted), None)

    def labs_of_user(self, user: str) -> list[LabConfig]:
        """Labs whose account the user belongs to (association or running jobs)."""
        accounts = {a for a, users in self.snapshot.members.items() if user in users}
        accounts |= {job.account for job in self.jobs_by_user.get(user, ())}
        return [lab for lab in self.labs if lab.account in accounts]

    def usage(self, lab: LabConfig) -> LabUsage:
        if lab.name not in self._usage:
            polled = self.snapshot.lab_usages.get((lab.name, lab.account, self.overcap_account))
            if polled is not None:
                # Counted by the poll that wrote these jobs, off the bot's interpreter; its
                # overcap share is by the members known then (they change with the caps).
                self._usage[lab.name] = polled
                return polled
            # Every configured lab's at once: one pass over the jobs for all of them.
            labs = self.labs if lab in self.labs else (lab,)
            usages = usage_of_labs(
                labs,
                self.snapshot.jobs,
                self.snapshot.cap_for,
                self.snapshot.members,
                self.overcap_account,
            )
            self._usage.update((each.name, usage) for each, usage in zip(labs, usages, strict=True))
        return self._usage[lab.name]
