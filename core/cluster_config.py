"""The tables that describe a cluster: how skybot reads it ([slurm], or a [[clusters]]
entry's source), and its labs. Pure; core/config_schema.py assembles the whole file.
"""

from __future__ import annotations

import re
from typing import Annotated

from msgspec import Meta, field

from core.config_base import NonNegative, Seconds, Section, one_of


class SlurmConfig(Section, frozen=True):
    bin_dir: str = "/usr/bin"
    command_timeout_seconds: Seconds = 20.0
    poll_seconds: Seconds = 15.0
    caps_poll_seconds: Seconds = 300.0
    overcap_partition: str = "overcap"
    overcap_account: str = "overcap"
    # Each sacct read re-reads this much before the previous poll: slurmdbd records a job's
    # end a little after the controller. A job's end is announced once however it is set.
    sacct_overlap_seconds: NonNegative = 300.0
    # A poll that takes more than this share of poll_seconds stretches the interval (a huge
    # queue must not turn skybot into the `watch squeue` it replaces); it shrinks back once
    # polls are cheap again.
    max_poll_share: Annotated[float, Meta(gt=0, le=1)] = 0.25
    # Where polls read only job states (Slurm 24.05+), a pending job's partition, account,
    # QOS, time limit, GRES or hold changed by `scontrol update` shows within this long
    # (at best within one poll interval plus the poll's own time).
    pending_changes_seconds: Seconds = 30.0


class LabConfig(Section, frozen=True):
    name: str
    partition: str
    account: str
    storage_roots: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for root in self.storage_roots:
            if not root.startswith("/"):
                raise ValueError(f"storage_roots: {root!r} is not an absolute path")


# A cluster's name goes into notice keys, button values (`NAME/…`) and `--cluster NAME`.
# One rule for every place a name travels: button values (`NAME/…`), the runner's
# [clusters.NAME] tables, notice keys.
CLUSTER_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
# How skybot reads a cluster: Slurm's commands on this host, or a slurmrestd daemon.
SOURCES = ("cli", "slurmrestd")
# How users' submit, cancel, tail and move reach a cluster: the runner, as the user, through
# the cluster's commands on this host; or not at all (refused with a message saying so).
ACTIONS = ("runner", "none")


class ClusterConfig(Section, frozen=True):
    """One Slurm cluster skybot serves: how it is read, how actions reach it, its labs.

    `source = "cli"` reads through Slurm's commands in `slurm.bin_dir`, with `slurm_conf`
    (if set) as their SLURM_CONF. `source = "slurmrestd"` reads through the daemon at `url`
    (`http://HOST:PORT` or `unix:/path/to.sock`) with the JWT in `token_file` (root-owned,
    re-read when rotated). `actions` defaults to "runner" where the commands are read,
    "none" for a slurmrestd source: a token good for everyone's jobs would make every action
    the bot's own (README, "slurmrestd").
    """

    name: str
    source: str = "cli"
    slurm_conf: str = ""
    url: str = ""
    token_file: str = ""
    actions: str = ""
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    labs: tuple[LabConfig, ...] = ()

    def __post_init__(self) -> None:
        one_of("source", self.source, SOURCES)
        if self.actions:
            one_of("actions", self.actions, ACTIONS)
        if self.source == "slurmrestd":
            for key in ("url", "token_file"):
                if not getattr(self, key):
                    raise ValueError(f"{key}: a slurmrestd source needs one")
            if not self.url.startswith(("http://", "https://", "unix:/")):
                raise ValueError(f"url: {self.url!r}: expected http://HOST:PORT or unix:/PATH")
        elif self.url or self.token_file:
            raise ValueError('url and token_file are for source = "slurmrestd"')
        if self.slurm_conf and not self.slurm_conf.startswith("/"):
            raise ValueError(f"slurm_conf: {self.slurm_conf!r} is not an absolute path")
        unique_labs(self.labs)

    @property
    def acts_through_runner(self) -> bool:
        """Whether users' actions on this cluster run through the runner (else refused)."""
        return (self.actions or ("runner" if self.source == "cli" else "none")) == "runner"


def unique_labs(labs: tuple[LabConfig, ...]) -> None:
    seen: set[str] = set()
    for i, lab in enumerate(labs):
        if lab.name.casefold() in seen:
            raise ValueError(f"labs[{i}].name: duplicate lab name {lab.name!r}")
        seen.add(lab.name.casefold())
