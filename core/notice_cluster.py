"""The cluster a DM is about, as the DM's builders need it (pure).

Job ids and node names repeat across clusters, so every DM's key and button names its cluster;
where skybot serves several, its text names it too; and what skybot does on that cluster
decides what the DM offers (job output is read through the runner, as the job's owner).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.cluster_config import ClusterConfig
from core.shared_config import SharedConfig, shown_name
from core.slack_text import literal


@dataclass(frozen=True, slots=True)
class NoticeCluster:
    """The cluster a DM is about: its `name` keys the DM and goes into its buttons; `shown`
    is the name the DM says (only where skybot serves several: "" otherwise); `reads_output`:
    skybot reads job output there (as the owner, through the runner), so the DM may show
    it and offer more."""

    name: str
    shown: str = ""
    reads_output: bool = True

    @property
    def buttons(self) -> str | None:
        """The cluster a DM's "Show log" buttons name, or None where skybot reads no
        output (no such buttons there)."""
        return self.name if self.reads_output else None

    @classmethod
    def of(cls, shared: SharedConfig, cluster: ClusterConfig) -> NoticeCluster:
        return cls(cluster.name, shown_name(shared, cluster), cluster.acts_through_runner)


def output_unread_line(cluster: str) -> str:
    """What a failure DM says instead of the output skybot does not read on `cluster`."""
    return (
        f"skybot does not read job output on {literal(cluster)}: the log is on "
        f"{literal(cluster)}'s login node."
    )
