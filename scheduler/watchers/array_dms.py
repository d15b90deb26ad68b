"""Job arrays' DMs: one when an array's first task starts, one when its last task ends.

Called by the job notifier (job_dms.py) inside the transaction that enqueues a batch's DMs and
moves the transition cursor. A task's end is told on its own only to those who asked for each
task (`/sky notify tasks on`, or `--mail-type=ARRAY_TASKS` where Slurm's record shows it);
for everyone else it puts the array on the list of those waiting for their end DM, which is
told once no task of it is pending or running (looked at after every poll, transitions or not).
The end DM's key names the cluster and the array, and is enqueued in the transaction that takes
the array off that list, so it is sent once whatever crashes in between (a replay enqueues the
same key, which the outbox ignores).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping

import sqlite_utils

from core.array_notices import (
    array_end_key,
    array_end_notice,
    array_is_wanted,
    is_array_member,
)
from core.notice_cluster import NoticeCluster
from core.records import FINAL_STATES, Job
from core.shared_config import SharedConfig
from core.transitions import Transition
from scheduler.watchers.directory import SlackKey
from store.alerts import load_preferences
from store.arrays import array_end_told, array_in_queue, array_task_ends, arrays_waiting
from store.outbox import OutboxMessage, enqueue


def told_per_array(job: Job, slack_key: SlackKey, task_optins: Collection[SlackKey]) -> bool:
    """Whether this job's news reaches `slack_key` through its array's DMs, not its own."""
    return is_array_member(job) and not job.mail_array_tasks and slack_key not in task_optins


def ends_per_array(
    transition: Transition, slack_key: SlackKey, task_optins: Collection[SlackKey]
) -> bool:
    """Whether this transition is an array task's end that `slack_key` hears of only as part
    of the array's end DM (requeues and preemptions are still told as they happen)."""
    return transition.to_state in FINAL_STATES and told_per_array(
        transition.job, slack_key, task_optins
    )


def array_end_messages(
    db: sqlite_utils.Database,
    cluster: str,
    preferences: Mapping[SlackKey, str],
    default_preference: str,
    now: float,
    buttons_cluster: str | None = None,
) -> list[OutboxMessage]:
    """The end DM of each array waiting for one (`wait_for_array_ends`) that has no task
    left in the queue, to each who waits for it and whose `/sky notify` preference wants how
    it ended; those arrays stop waiting. The caller enqueues the DMs in the same transaction."""
    messages = []
    for array_job_id, slack_keys in sorted(arrays_waiting(db, cluster).items()):
        if array_in_queue(db, cluster, array_job_id):
            continue
        array_end_told(db, cluster, array_job_id)
        records = array_task_ends(db, cluster, array_job_id)
        if not records:
            continue
        notice = array_end_notice(array_job_id, records, cluster, now, buttons_cluster)
        for team_id, user_id in sorted(slack_keys):
            if not array_is_wanted(
                preferences.get((team_id, user_id), default_preference), records
            ):
                continue
            key = array_end_dm_key(cluster, array_job_id, team_id, user_id)
            messages.append(OutboxMessage(key, user_id, notice.text, notice.blocks))
    return messages


def array_end_dm_key(cluster: str, array_job_id: int, team_id: str, user_id: str) -> str:
    """The outbox key of one Slack account's end DM of one array."""
    return f"{array_end_key(cluster, array_job_id)}:{team_id}:{user_id}"


def tell_finished_arrays(
    db: sqlite_utils.Database, where: NoticeCluster, shared: SharedConfig
) -> int:
    """Enqueue the end DMs of `where`'s arrays that finished since the last look, in one
    transaction: after a poll that recorded no transition, the queue may still have let go of
    an array."""
    with db.atomic():
        messages = array_end_messages(
            db,
            where.name,
            load_preferences(db),
            shared.notifications.default_preference,
            time.time(),
            where.buttons,
        )
        return enqueue(db, messages, time.time()) if messages else 0
