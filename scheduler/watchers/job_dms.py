"""The job notifier: DMs about jobs that ended or were requeued.

It reads job_transitions rows past its cursor, decides who gets which DM
(core/job_notices.py) and advances the cursor in the transaction that enqueues the DMs, so no
transition is missed or notified twice across restarts.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from functools import partial

import sqlite_utils

from core.array_notices import is_array_member
from core.cluster_config import ClusterConfig
from core.job_notices import TAIL_KINDS, JobNotice, Seen, decide_job_notice, notice_kind, wants
from core.job_output import OutputTail
from core.notice_cluster import NoticeCluster
from core.records import FINAL_STATES, Job
from core.runner_contract import RunnerCall
from core.shared_config import SharedConfig, preemptible_on
from core.summary_notices import MAX_SEPARATE_NOTICES, digest_notice
from core.transitions import REQUEUED, Transition
from scheduler.log_tails import TailSettings, fetch_output_tails
from scheduler.watchers.array_dms import (
    array_end_dm_key,
    array_end_messages,
    ends_per_array,
    tell_finished_arrays,
)
from scheduler.watchers.directory import SlackDirectory, SlackKey
from scheduler.watchers.job_starts import start_messages
from store.alerts import advance_cursor, load_cursor, load_log_tail_optouts, load_preferences
from store.arrays import load_task_optins, wait_for_array_ends
from store.outbox import OutboxMessage, enqueue
from store.transitions import earlier_job_records, load_transitions, pending_transition_users
from store.writer import StoreWriter

# Transitions turned into notices per transaction; a backlog is worked through in batches.
BATCH = 2000
# Transitions worth a look: final states and requeues.
NOTABLE = FINAL_STATES | {REQUEUED}


# ------------------------------------------------------------------------------ job DMs


async def process_transitions(
    writer: StoreWriter,
    identity: SlackDirectory,
    shared: SharedConfig,
    cluster: ClusterConfig,
    *,
    batch: int = BATCH,
    runner: RunnerCall | None = None,
) -> int:
    """Enqueue DMs for every transition of `cluster`'s jobs not processed yet; returns how
    many were enqueued.

    Safe to call at any time and any number of times (after each Slurm poll, at start-up):
    each transition is processed once, whatever crashes in between. With a `runner`, failure
    DMs carry the end of the job's output, read as its owner in a bounded time first (not on
    a cluster where skybot does not act: there the DM says the log is not read).
    """
    settings = shared.notifications
    total = 0
    reads_output = runner is not None and cluster.acts_through_runner
    while True:
        users, through = await writer.run(pending_transition_users, cluster.name, batch)
        if through is None:
            where = NoticeCluster.of(shared, cluster)
            return total + await writer.run(tell_finished_arrays, where, shared)
        # Resolved here, on the event loop that owns the identity directory.
        targets = {user: identity.slack_users_of(user) for user in users}
        tails: dict[int, list[OutputTail]] = {}
        if runner is not None and reads_output and settings.log_tail_lines > 0:
            wanted = await writer.run(tail_candidates, cluster, targets, through, shared)
            tails = await fetch_output_tails(
                runner, wanted, TailSettings(settings.log_tail_lines, settings.log_tail_seconds)
            )
        total += await writer.run(
            notify_transitions, cluster, targets, through, shared, None, tails
        )


def tail_candidates(
    db: sqlite_utils.Database,
    cluster: ClusterConfig,
    targets: Mapping[str, Sequence[SlackKey]],
    through: int,
    shared: SharedConfig,
) -> dict[int, Job]:
    """Jobs of the next batch whose DM will show their output: a failure (`TAIL_KINDS`) that
    one of the owner's Slack accounts hears about and has not turned output off for."""
    prefs = load_preferences(db)
    optouts = load_log_tail_optouts(db)
    preemptible = preemptible_on(shared, cluster)
    task_optins = load_task_optins(db)
    chosen: dict[int, Job] = {}
    for row_id, transition, _ in load_transitions(
        db, cluster.name, load_cursor(db, cluster.name), through, NOTABLE
    ):
        kind = notice_kind(transition, preemptible)
        if kind not in TAIL_KINDS:
            continue
        for slack_key in targets.get(transition.job.user, ()):
            if ends_per_array(transition, slack_key, task_optins):
                continue  # told in its array's end DM, which offers the log on a click
            pref = prefs.get(slack_key, shared.notifications.default_preference)
            if slack_key not in optouts and wants(pref, kind):
                chosen[row_id] = transition.job
                break
    return chosen


def notify_transitions(
    db: sqlite_utils.Database,
    cluster: ClusterConfig,
    targets: Mapping[str, Sequence[SlackKey]],
    through: int,
    shared: SharedConfig,
    now: float | None = None,
    tails: Mapping[int, Sequence[OutputTail]] | None = None,
) -> int:
    """Decide the DMs for `cluster`'s transitions up to id `through`, enqueue them and move
    its cursor, all in one transaction. Returns how many messages were newly enqueued.

    `tails` (by transition id) is the end of failed jobs' output, shown to each of the owner's
    Slack accounts that has not turned it off: DMs go to the owner only, never to a channel.
    """
    tails = tails or {}
    name = cluster.name
    where = NoticeCluster.of(shared, cluster)
    with db.atomic():
        cursor = load_cursor(db, name)
        if through <= cursor:
            return 0
        prefs = load_preferences(db)
        optouts = load_log_tail_optouts(db) if tails else set()
        task_optins = load_task_optins(db)
        per_target: dict[SlackKey, list[tuple[int, JobNotice]]] = {}
        arrays: dict[int, set[SlackKey]] = {}
        for row_id, transition, at in load_transitions(db, name, cursor, through, NOTABLE):
            slack_keys = targets.get(transition.job.user, ())
            per_array = [k for k in slack_keys if ends_per_array(transition, k, task_optins)]
            if per_array and transition.job.array_job_id is not None:
                arrays.setdefault(transition.job.array_job_id, set()).update(per_array)
                slack_keys = [k for k in slack_keys if k not in per_array]
            started = (
                interrupted_run_start(db, name, row_id, transition, at)
                if slack_keys and transition.to_state == REQUEUED
                else None
            )
            for slack_key in slack_keys:
                pref = prefs.get(slack_key, shared.notifications.default_preference)
                output = () if slack_key in optouts else tails.get(row_id, ())
                seen = Seen(at, started, output)
                notice = decide_job_notice(transition, pref, seen, shared, cluster)
                if notice is not None:
                    per_target.setdefault(slack_key, []).append((row_id, notice))
        now = time.time() if now is None else now
        messages = [
            message
            for slack_key, items in per_target.items()
            for message in _messages(slack_key, items, where, slack_key in task_optins)
        ]
        wait_for_array_ends(db, name, arrays, now, partial(array_end_dm_key, name))
        default = shared.notifications.default_preference
        messages += array_end_messages(db, name, prefs, default, now, where.buttons)
        messages += start_messages(db, targets, cursor, through, where)
        added = enqueue(db, messages, now)
        if not advance_cursor(db, name, cursor, through):
            raise RuntimeError("job transition cursor moved during notification")
        return added


def interrupted_run_start(
    db: sqlite_utils.Database, cluster: str, row_id: int, transition: Transition, at: float
) -> float | None:
    """When the run a requeue interrupted had started, from the job's earlier transitions.

    The requeued job's own record cannot say: Slurm gives a pending job the forecast start
    of its next run. The poll that saw the run start (or first saw it running) recorded it.
    """
    for earlier in earlier_job_records(
        db, cluster, transition.job.job_id, row_id, transition.restarts
    ):
        if earlier.start_time and earlier.start_time <= at:
            return float(earlier.start_time)
    return None


def _messages(
    slack_key: SlackKey,
    items: list[tuple[int, JobNotice]],
    where: NoticeCluster,
    each_task: bool = False,
) -> list[OutboxMessage]:
    """Each notice as its own DM, or more than `MAX_SEPARATE_NOTICES` as one summary naming
    the cluster. Array tasks whose owner asked to hear of each (`/sky notify tasks on`:
    `each_task`, or `--mail-type=ARRAY_TASKS`) are each their own DM, however many."""
    team_id, user_id = slack_key

    def one_by_one(notice: JobNotice) -> bool:
        job = notice.job
        return job is not None and is_array_member(job) and (each_task or job.mail_array_tasks)

    tasks = [n for _, n in items if one_by_one(n)]
    rest = [(row_id, n) for row_id, n in items if not one_by_one(n)]
    separate = tasks + ([n for _, n in rest] if len(rest) <= MAX_SEPARATE_NOTICES else [])
    messages = [
        OutboxMessage(f"{n.key}:{team_id}:{user_id}", user_id, n.text, n.blocks) for n in separate
    ]
    if len(rest) > MAX_SEPARATE_NOTICES:
        first, last = rest[0][0], rest[-1][0]
        key = f"jobs:{where.name}:{first}-{last}:{team_id}:{user_id}"
        digest = digest_notice([n for _, n in rest], key, where.name, where.buttons)
        messages.append(OutboxMessage(digest.key, user_id, digest.text, digest.blocks))
    return messages
