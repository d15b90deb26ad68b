"""Job arrays' DMs: one when an array's first task starts, one when its last task ends.

Called by the job notifier (job_dms.py) inside the transaction that enqueues a batch's DMs and
moves the transition cursor. A task's end is told on its own only to those who asked for each
task (`/sky notify tasks on`, or `--mail-type=ARRAY_TASKS` where Slurm's record shows it);
for everyone else it only makes skybot look whether the array is done: no task of it pending
or running in the snapshot, which the poll wrote in the same transaction as the ends. The end
DM's key names the cluster and the array, and is enqueued with the cursor's move, so it is sent
once whatever crashes in between (a replay enqueues the same key, which the outbox ignores).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import sqlite_utils

from core.array_notices import array_end_notice, array_is_wanted, is_array_member
from core.records import FINAL_STATES, Job
from core.transitions import Transition
from scheduler.watchers.directory import SlackKey
from store.arrays import array_in_queue, array_task_ends
from store.outbox import OutboxMessage


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
    arrays: Mapping[int, Collection[SlackKey]],
    preferences: Mapping[SlackKey, str],
    default_preference: str,
    now: float,
    buttons_cluster: str | None = None,
) -> list[OutboxMessage]:
    """The end DM of each array in `arrays` (array id -> who may hear of it) that has no task
    left in the queue, to each of them whose `/sky notify` preference wants how it ended."""
    messages = []
    for array_job_id, slack_keys in sorted(arrays.items()):
        if array_in_queue(db, cluster, array_job_id):
            continue
        records = array_task_ends(db, cluster, array_job_id)
        if not records:
            continue
        notice = array_end_notice(array_job_id, records, cluster, now, buttons_cluster)
        for team_id, user_id in sorted(slack_keys):
            if not array_is_wanted(
                preferences.get((team_id, user_id), default_preference), records
            ):
                continue
            key = f"{notice.key}:{team_id}:{user_id}"
            messages.append(OutboxMessage(key, user_id, notice.text, notice.blocks))
    return messages
