"""Store queries that the watchers and the metrics read through (they run no SQL themselves)."""

from __future__ import annotations

from dataclasses import replace

import sqlite_utils

from core.transitions import REQUEUED
from store.alerts import advance_cursor
from store.db import open_db
from store.outbox import OutboxMessage, enqueue, mark_sent, outbox_counts, park, parked_error_counts
from store.transitions import earlier_job_records, load_transitions, pending_transition_users
from tests.support.factories import CLUSTER, job
from tests.support.slurm_polls import save_slurm_poll


def memory_db() -> sqlite_utils.Database:
    return open_db(":memory:")


def test_pending_transition_users_reads_past_the_cursor_in_batches() -> None:
    db = memory_db()
    assert pending_transition_users(db, CLUSTER, 10) == (set(), None)
    save_slurm_poll(db, [job(1), job(2, user="bob"), job(3, user="carol")], [], [], at=10.0)
    assert pending_transition_users(db, CLUSTER, 2) == ({"alice", "bob"}, 2)
    assert advance_cursor(db, CLUSTER, 0, 2)
    assert pending_transition_users(db, CLUSTER, 2) == ({"carol"}, 3)


def test_load_transitions_keeps_the_wanted_states_in_the_id_range() -> None:
    db = memory_db()
    running = [job(1, start_time=5), job(2, start_time=5)]
    save_slurm_poll(db, running, [], [], at=10.0)  # ids 1, 2: RUNNING
    ended = [replace(running[0], state="COMPLETED", end_time=15)]
    save_slurm_poll(db, [running[1]], ended, [], at=20.0)  # id 3: job 1 COMPLETED
    rows = load_transitions(db, CLUSTER, 0, 3, {"COMPLETED", REQUEUED})
    assert [(row_id, t.job.job_id, t.to_state, at) for row_id, t, at in rows] == [
        (3, 1, "COMPLETED", 20.0)
    ]
    assert load_transitions(db, CLUSTER, 3, 3, {"COMPLETED"}) == []
    assert [row_id for row_id, _, _ in load_transitions(db, CLUSTER, 0, 2, {"RUNNING"})] == [1, 2]


def test_earlier_job_records_are_the_runs_before_newest_first() -> None:
    db = memory_db()
    first = job(7, start_time=100)
    save_slurm_poll(db, [first], [], [], at=110.0)  # id 1, restarts 0
    requeued = replace(first, state="PENDING", restarts=1, start_time=500)
    save_slurm_poll(db, [requeued], [], [], at=200.0)  # id 2, restarts 1
    second = replace(requeued, state="RUNNING", start_time=300)
    save_slurm_poll(db, [second], [], [], at=300.0)  # id 3, restarts 1
    assert [r.start_time for r in earlier_job_records(db, CLUSTER, 7, 3, 1)] == [100]
    assert [r.start_time for r in earlier_job_records(db, CLUSTER, 7, 4, 2)] == [300, 500, 100]
    assert [r.start_time for r in earlier_job_records(db, CLUSTER, 7, 4, 2, limit=1)] == [300]
    assert earlier_job_records(db, CLUSTER, 8, 4, 2) == []


def test_outbox_counts_by_state_and_parked_by_error() -> None:
    db = memory_db()
    messages = [OutboxMessage(f"k{i}", "U1", "hello") for i in range(5)]
    enqueue(db, messages, 1.0)
    ids = [row[0] for row in db.execute("SELECT id FROM outbox ORDER BY id")]
    mark_sent(db, ids[0], 2.0)
    park(db, ids[1], "channel_not_found")
    park(db, ids[2], "channel_not_found")
    park(db, ids[3], "missing_scope")
    assert outbox_counts(db) == {"queued": 1, "sent": 1, "parked": 3}
    assert parked_error_counts(db) == {"channel_not_found": 2, "missing_scope": 1}
