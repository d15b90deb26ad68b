"""Start DMs: which of a batch of job transitions are starts that someone asked to hear of.

Called by the job notifier (job_dms.py) inside the transaction that enqueues the batch's end
DMs and moves the transition cursor, so a start is told once across restarts, like an end.
Who hears: each of the owner's linked Slack accounts that turned start DMs on, and whoever
submitted the job with `--notify-start`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlite_utils

from core.array_notices import array_start_notice
from core.notice_cluster import NoticeCluster
from core.start_notices import is_start, start_notice
from scheduler.watchers.array_dms import told_per_array
from scheduler.watchers.directory import SlackKey
from store.alerts import load_start_optins
from store.arrays import load_task_optins
from store.outbox import OutboxMessage
from store.submissions import start_watchers
from store.transitions import load_transitions


def start_messages(
    db: sqlite_utils.Database,
    targets: Mapping[str, Sequence[SlackKey]],
    after: int,
    through: int,
    where: NoticeCluster,
) -> list[OutboxMessage]:
    """The start DMs of `where`'s transitions with ids in (after, through]: an array's
    first task's start stands for the array (its key names the array, so later tasks'
    starts are not told again), unless its owner asked to hear of each task."""
    cluster = where.name
    optins = load_start_optins(db)
    task_optins = load_task_optins(db)
    messages = []
    for _, transition, at in load_transitions(db, cluster, after, through, {"RUNNING"}):
        if not is_start(transition, at):
            continue
        job = transition.job
        wanted = {key for key in targets.get(job.user, ()) if key in optins}
        wanted.update(start_watchers(db, cluster, job.job_id, job.comment))
        if not wanted:
            continue
        notice = start_notice(transition, where)
        for team_id, user_id in sorted(wanted):
            told = notice
            if job.array_job_id is not None and told_per_array(
                job, (team_id, user_id), task_optins
            ):
                told = array_start_notice(notice, cluster, job.array_job_id)
            key = f"{told.key}:{team_id}:{user_id}"
            messages.append(OutboxMessage(key, user_id, told.text, told.blocks))
    return messages
