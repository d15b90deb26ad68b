"""The job DMs a Slurm poll decides, in the poll's own writer call (issue 41).

Before each save the poller asks `PollDms.deciding()` (scheduler/slurm/poller.py): it copies
the identity links here on the loop and returns the decision that store/poll_save.py runs in
the poll's transaction, after the poll's transitions are written. The decision is the job
notifier's (job_dms.py `notify_transitions`: DMs enqueued, cursor moved, array ends, starts),
so the transitions, their DMs and the cursor commit together, or none of them.

One thing cannot happen inside the transaction: reading failed jobs' output through the
runner (a process per file, seconds at worst). A batch with output to show is left as it is
(cursor unmoved, the jobs named); as soon as the poll is saved their output is read, beside
the snapshot's refresh, and the batch enqueued in one more call, which `follow_up` (the
watchers' after-poll hook) waits for. A backlog bigger than a batch goes the notifier's own
way (`process_transitions`), as it does when the poller does not decide.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

import sqlite_utils

from core.cluster_config import ClusterConfig
from core.notice_cluster import NoticeCluster
from core.records import Job
from core.runner_contract import RunnerCall
from core.shared_config import SharedConfig
from scheduler.log_tails import TailSettings, fetch_output_tails
from scheduler.watchers.array_dms import tell_finished_arrays
from scheduler.watchers.directory import LinkedDirectory, SlackKey
from scheduler.watchers.job_dms import (
    BATCH,
    notify_transitions,
    process_transitions,
    tail_candidates,
)
from store.poll_save import Then
from store.transitions import pending_transition_users, transitions_after
from store.writer import StoreWriter


@dataclass(frozen=True, slots=True)
class Decided:
    """What a poll's decision did: DMs enqueued; or a batch left for its jobs' output
    (`output_of`, by transition id, through `through`); and whether transitions are left
    past it (`more`: a backlog, for the notifier's own loop)."""

    added: int = 0
    output_of: Mapping[int, Job] = field(default_factory=dict)
    through: int | None = None
    more: bool = False


def decide_poll_dms(
    db: sqlite_utils.Database,
    cluster: ClusterConfig,
    targets: Mapping[str, Sequence[SlackKey]],
    shared: SharedConfig,
    reads_output: bool,
) -> Decided:
    """The DMs of `cluster`'s next batch of transitions past its cursor, enqueued with the
    cursor moved (in the caller's transaction); or, if the batch shows some failed job's
    output, nothing yet and those jobs named."""
    _, through = pending_transition_users(db, cluster.name, BATCH)
    if through is None:
        return Decided(tell_finished_arrays(db, NoticeCluster.of(shared, cluster), shared))
    more = transitions_after(db, cluster.name, through)
    if reads_output:
        wanted = tail_candidates(db, cluster, targets, through, shared)
        if wanted:
            return Decided(0, wanted, through, more)
    return Decided(notify_transitions(db, cluster, targets, through, shared), more=more)


class PollDms:
    """One cluster's job DMs, decided in its Slurm poll's save; the rest after it."""

    def __init__(
        self,
        writer: StoreWriter,
        identity: LinkedDirectory,
        shared: SharedConfig,
        cluster: ClusterConfig,
        runner: RunnerCall | None,
        wake_sender: Callable[[], None] | None,
    ) -> None:
        self._writer = writer
        self._identity = identity
        self._shared = shared
        self._cluster = cluster
        self._runner = runner
        self._wake = wake_sender
        settings = shared.notifications
        self._reads_output = (
            runner is not None and cluster.acts_through_runner and settings.log_tail_lines > 0
        )
        # Whether the poller decides in its save (it asked `deciding` once): if not, the
        # notifier's own loop runs after each poll, as it did before.
        self.in_poll = False
        self._targets: dict[str, list[SlackKey]] = {}
        # What the last poll's decision left: a batch waiting for output, a backlog.
        self._left: Decided | None = None
        # The read of that batch's output and its enqueueing, started when the poll saved.
        self._output: asyncio.Task[int] | None = None

    def deciding(self) -> Then[Decided]:
        """The decision for the poll about to be saved, its links read now, on the loop."""
        self.in_poll = True
        self._targets = self._identity.linked_accounts()
        return partial(
            decide_poll_dms,
            cluster=self._cluster,
            targets=self._targets,
            shared=self._shared,
            reads_output=self._reads_output,
        )

    def decided(self, outcome: Decided | None) -> None:
        """The poll is saved: wake the sender for what it enqueued, and start reading the
        output a batch waits for (beside the snapshot's refresh, not after it). None: the
        decision failed and was undone; its transitions wait for `follow_up`."""
        self._left = Decided(more=True) if outcome is None else outcome
        if self._left.added:
            self._woken()
        if self._left.output_of and self._runner is not None and self._left.through is not None:
            self._output = asyncio.create_task(
                self._with_output(self._runner, self._left.output_of, self._left.through)
            )

    async def follow_up(self) -> int:
        """After the poll: the batch that waited for its jobs' output, then any backlog;
        returns how many DMs were enqueued."""
        left, self._left = self._left, None
        output, self._output = self._output, None
        if self.in_poll and left is None:
            return 0  # no poll saved since the last look
        added = 0 if output is None else await output
        if left is None or left.more:
            added += await process_transitions(
                self._writer, self._identity, self._shared, self._cluster, runner=self._runner
            )
        return added

    async def _with_output(self, runner: RunnerCall, jobs: Mapping[int, Job], through: int) -> int:
        """Read the jobs' output as their owners, then enqueue the batch through `through`
        with it, in one call (the cursor moves with it)."""
        settings = self._shared.notifications
        tails = await fetch_output_tails(
            runner, jobs, TailSettings(settings.log_tail_lines, settings.log_tail_seconds)
        )
        added = await self._writer.run(
            notify_transitions, self._cluster, self._targets, through, self._shared, None, tails
        )
        if added:
            self._woken()
        return added

    def _woken(self) -> None:
        if self._wake is not None:
            self._wake()
