"""The cap-wait watcher: DMs to users whose jobs have long waited behind their lab's GPU cap.

It tracks each lab's current stretch at its cap (cap_episodes) and enqueues the DMs that
stretch calls for (core/cap_waits.py) in the transaction that stores it.
"""

from __future__ import annotations

import time

import sqlite_utils

from core.cap_waits import cap_wait_notices, next_episodes
from core.cluster_config import ClusterConfig
from core.shared_config import SharedConfig
from core.view import ClusterView
from scheduler.watchers.directory import SlackDirectory
from store.alerts import load_cap_episodes, save_cap_episodes
from store.outbox import OutboxMessage, enqueue
from store.writer import StoreWriter


async def check_cap_waits(
    writer: StoreWriter,
    identity: SlackDirectory,
    shared: SharedConfig,
    view: ClusterView,
    where: ClusterConfig,
    now: float | None = None,
) -> int:
    """DM users whose jobs have waited behind their lab's cap for long on `where` (whose
    view `view` is; its overcap partition is what the DM suggests); returns how many."""
    cluster, wait_minutes = where.name, shared.notifications.cap_wait_minutes
    snapshot = view.snapshot
    if wait_minutes <= 0 or snapshot.source("slurm").taken_at is None:
        return 0
    now = time.time() if now is None else now
    # The view's, computed once per snapshot off the loop (store/reader.py): counting them
    # again here cost the writer's thread a pass over every job and node each poll.
    usages = [view.usage(lab) for lab in view.labs]
    idle = view.idle_by_type
    overcap = where.slurm
    flags = f"--partition={overcap.overcap_partition} --account={overcap.overcap_account}"

    def decide(db: sqlite_utils.Database) -> int:
        with db.atomic():
            episodes = next_episodes(load_cap_episodes(db, cluster), usages, now)
            save_cap_episodes(db, cluster, episodes)
            notices = cap_wait_notices(
                episodes,
                usages,
                now,
                60 * wait_minutes,
                idle,
                flags,
            )
            messages = [
                OutboxMessage(f"{n.key}:{team}:{user_id}", user_id, n.text)
                for n in notices
                for team, user_id in targets.get(n.user, ())
            ]
            return enqueue(db, messages, now)

    waiting_users = {j.user for u in usages for j in u.pending_at_cap}
    targets = {user: identity.slack_users_of(user) for user in waiting_users}
    return await writer.run(decide)
