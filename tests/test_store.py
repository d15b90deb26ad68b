from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
import sqlite_utils

from core.cluster_config import LabConfig
from core.lab_usage import lab_usage
from core.records import DirectoryUsage, FilesystemUsage, LabCap
from store.caps_and_storage import save_caps, save_storage
from store.db import SCHEMA_VERSION, SchemaTooNewError, migrate, open_db
from store.history import lab_usage_series, save_lab_usage
from store.reader import SnapshotCache
from store.snapshots import load_snapshot, record_poll_failure
from tests.support.factories import CLUSTER, job, node
from tests.support.slurm_polls import save_slurm_poll


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "skybot.db"


def test_snapshot_round_trip_and_transitions(db_path: Path) -> None:
    db = open_db(db_path)
    live = [job(1, gpus_by_type={"a40": 2}), job(2, state="PENDING", reason="AssocGrpGRES")]
    nodes = [node("clippy", "a40", used=2)]
    first = save_slurm_poll(db, live, [], nodes, at=100.0)
    assert [(t.job.job_id, t.to_state) for t in first] == [(1, "RUNNING"), (2, "PENDING")]

    snapshot = load_snapshot(db, CLUSTER)
    assert snapshot.jobs == tuple(live)
    assert snapshot.nodes == tuple(nodes)
    assert snapshot.source("slurm").taken_at == 100.0

    # Job 1 ends between polls: only sacct still knows it.
    second = save_slurm_poll(db, [live[1]], [job(1, state="FAILED", exit_code=3)], nodes, at=115.0)
    assert [(t.job.job_id, t.from_state, t.to_state) for t in second] == [(1, "RUNNING", "FAILED")]
    rows = list(db.query("SELECT job_id, to_state FROM job_transitions ORDER BY id"))
    assert [(r["job_id"], r["to_state"]) for r in rows] == [
        (1, "RUNNING"),
        (2, "PENDING"),
        (1, "FAILED"),
    ]
    # The same sacct record seen again (overlapping windows) is not a new transition.
    assert save_slurm_poll(db, [live[1]], [job(1, state="FAILED")], nodes, at=130.0) == []


def test_an_end_from_sacct_is_told_with_the_output_path_squeue_showed(db_path: Path) -> None:
    db = open_db(db_path)
    save_slurm_poll(db, [job(1, std_out="/dev/null", exit_code=None)], [], [], at=100.0)
    save_slurm_poll(db, [], [], [], at=115.0)  # gone from squeue; sacct not caught up yet
    ended = job(1, state="FAILED", std_out="", work_dir="/tmp", exit_code=2)
    (transition,) = save_slurm_poll(db, [], [ended], [], at=130.0)
    assert (transition.to_state, transition.job.std_out) == ("FAILED", "/dev/null")
    assert transition.job.exit_code == 2


def test_failure_keeps_last_good_snapshot_and_recovery_clears_it(db_path: Path) -> None:
    db = open_db(db_path)
    save_slurm_poll(db, [job(1)], [], [], at=100.0)
    record_poll_failure(db, CLUSTER, "slurm", "squeue timed out after 20 s", at=115.0)
    record_poll_failure(db, CLUSTER, "slurm", "squeue timed out after 20 s", at=130.0)
    snapshot = load_snapshot(db, CLUSTER)
    assert [j.job_id for j in snapshot.jobs] == [1]
    status = snapshot.source("slurm")
    assert status.failing and status.error_at == 115.0 and status.taken_at == 100.0
    save_slurm_poll(db, [job(1)], [], [], at=145.0)
    assert not load_snapshot(db, CLUSTER).source("slurm").failing


def test_caps_members_storage(db_path: Path) -> None:
    db = open_db(db_path)
    save_caps(
        db,
        CLUSTER,
        [LabCap("hoffman-lab", 4), LabCap("overcap", None)],
        {"hoffman-lab": {"alice", "bob"}},
        at=1.0,
    )
    report = DirectoryUsage("/srv/h", "alice", "/srv/h/alice", datetime(2026, 11, 22, 3), 5, "5K")
    save_storage(db, CLUSTER, [report], [FilesystemUsage("/srv/h", 100, 40, 60)], at=2.0)
    snapshot = load_snapshot(db, CLUSTER)
    assert snapshot.cap_for("hoffman-lab") == 4 and snapshot.cap_for("overcap") is None
    assert snapshot.members["hoffman-lab"] == {"alice", "bob"}
    assert snapshot.directories == (report,)
    assert snapshot.filesystems[0].percent_used == pytest.approx(40.0)


def test_history_retention(db_path: Path) -> None:
    db = open_db(db_path)
    usage = lab_usage("hoffman-lab", "hoffman-lab", 4, [job(1, gpus_by_type={"a40": 1})])
    save_lab_usage(db, CLUSTER, [usage], at=0.0, keep_days=1)
    save_lab_usage(db, CLUSTER, [usage], at=2 * 86400.0, keep_days=1)
    assert lab_usage_series(db, CLUSTER, "hoffman-lab", since=0) == [(2 * 86400.0, 1, 4)]


def test_every_polls_pruning_finds_old_rows_by_index_not_by_reading_every_row(
    db_path: Path,
) -> None:
    db = open_db(db_path)
    statements: list[str] = []
    db.conn.set_trace_callback(statements.append)
    usage = lab_usage("hoffman-lab", "hoffman-lab", 4, [])
    save_lab_usage(db, CLUSTER, [usage], at=2 * 86400.0, keep_days=1)
    db.conn.set_trace_callback(None)
    prunes = [s for s in statements if s.startswith("DELETE")]
    assert len(prunes) >= 5, statements
    for prune in prunes:
        plan = " ".join(row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {prune}"))
        assert "SCAN" not in plan, (prune, plan)


def test_migrations_are_idempotent_and_refuse_newer_schemas(db_path: Path) -> None:
    open_db(db_path).close()
    db = open_db(db_path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(SchemaTooNewError):
        open_db(db_path)


def test_a_migration_statement_may_hold_semicolons() -> None:
    """A trigger's body and a quoted ';' belong to their statement; nothing splits on them."""
    db = sqlite_utils.Database(memory=True)
    migration = (
        "CREATE TABLE notes (text TEXT NOT NULL)",
        "CREATE TABLE note_log (text TEXT NOT NULL)",
        """
        CREATE TRIGGER notes_logged AFTER INSERT ON notes BEGIN
            INSERT INTO note_log (text) VALUES ('logged; ' || new.text);
        END
        """,
        "INSERT INTO notes (text) VALUES ('a; b')",
    )
    migrate(db, [migration])
    assert db.execute("SELECT text FROM notes").fetchall() == [("a; b",)]
    assert db.execute("SELECT text FROM note_log").fetchall() == [("logged; a; b",)]
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1


async def test_reader_sees_new_snapshots_only_after_commit(db_path: Path) -> None:
    writer = open_db(db_path)
    cache = SnapshotCache(
        db_path, CLUSTER, (LabConfig("hoffman-lab", "hoffman-lab", "hoffman-lab"),)
    )
    assert (await cache.refresh()).snapshot.jobs == ()
    with writer.atomic():
        writer.execute("DELETE FROM jobs")
        save_slurm_poll(writer, [job(9)], [], [], at=1.0)
        # Mid-transaction, the reader still gets the last committed snapshot, without waiting.
        assert (await cache.refresh()).snapshot.jobs == ()
    view = await cache.refresh()
    assert [j.job_id for j in view.snapshot.jobs] == [9]
    assert view is await cache.refresh(), "unchanged version must not reload"
    cache.close()


def test_previous_report_size_gives_weekly_growth(db_path: Path) -> None:
    db = open_db(db_path)
    week1 = DirectoryUsage(
        "/srv/h", "alice", "/srv/h/alice", datetime(2026, 11, 15, 3), 100, "100K"
    )
    week2 = DirectoryUsage(
        "/srv/h", "alice", "/srv/h/alice", datetime(2026, 11, 22, 3), 250, "250K"
    )
    save_storage(db, CLUSTER, [week1], [], at=1.0)
    assert load_snapshot(db, CLUSTER).previous_kib == {}
    save_storage(db, CLUSTER, [week2], [], at=2.0)
    # The same weekly report read again by a later poll is not a new week.
    save_storage(db, CLUSTER, [week2], [], at=3.0)
    assert load_snapshot(db, CLUSTER).previous_kib == {"/srv/h/alice": 100}


def test_history_starts_at_the_first_poll_and_stays(db_path: Path) -> None:
    from store.slurm_writes import history_start

    db = open_db(db_path)
    assert history_start(db, CLUSTER, now=1000.0) == 1000.0
    assert history_start(db, CLUSTER, now=5000.0) == 1000.0


def test_a_preempted_job_ends_once_after_sacct_forgets_the_preemption(db_path: Path) -> None:
    """22.05's sacct counts restarts from the runs in its window: once the window slides past
    the preempted run the job seems to have restarted 0 times. Its end is still one event."""
    db = open_db(db_path)
    overcap = {"partition": "overcap", "account": "overcap"}
    save_slurm_poll(db, [job(9, **overcap)], [], [], at=100.0)
    preempted_run = job(9, state="PREEMPTED", **overcap)
    requeued = job(9, state="PENDING", restarts=1, reason="BeginTime", **overcap)
    kinds = save_slurm_poll(db, [requeued], [preempted_run], [], at=115.0)
    cancelled = job(9, state="CANCELLED", restarts=1, **overcap)
    kinds += save_slurm_poll(db, [cancelled], [preempted_run, cancelled], [], at=130.0)
    # squeue has forgotten it; sacct's window no longer holds the preempted run.
    for at in (145.0, 460.0, 475.0):
        kinds += save_slurm_poll(db, [], [replace(cancelled, restarts=0)], [], at=at)
    assert [(t.to_state, t.restarts) for t in kinds] == [("REQUEUED", 1), ("CANCELLED", 1)]


def test_an_ended_job_keeps_the_gpus_it_was_seen_running_on(db_path: Path) -> None:
    db = open_db(db_path)
    save_slurm_poll(db, [job(5, gpus_by_type={"a40": 6})], [], [], at=100.0)
    # Slurm has emptied gres_detail, and accounting does not track gres/gpu.
    ended = save_slurm_poll(db, [], [job(5, state="COMPLETED")], [], at=115.0)
    assert [(t.to_state, t.job.gpus_by_type) for t in ended] == [("COMPLETED", {"a40": 6})]
    # Seen running two polls ago (not in the previous snapshot): the transition remembers.
    save_slurm_poll(db, [job(6, gpus_by_type={"rtx_6000": 2})], [], [], at=130.0)
    save_slurm_poll(db, [job(6, state="COMPLETING")], [], [], at=145.0)
    later = save_slurm_poll(db, [], [job(6, state="FAILED", exit_code=1)], [], at=160.0)
    assert [t.job.gpus_by_type for t in later] == [{"rtx_6000": 2}]
    # A job that never held GPUs stays without.
    save_slurm_poll(db, [job(7, state="PENDING", gpus_by_type={"a40": 1})], [], [], at=175.0)
    never = save_slurm_poll(db, [], [job(7, state="CANCELLED")], [], at=190.0)
    assert [t.job.gpus_by_type for t in never] == [{}]


def test_a_preemption_names_the_gpus_of_the_run_it_stopped(db_path: Path) -> None:
    db = open_db(db_path)
    overcap = {"partition": "overcap", "account": "overcap"}
    save_slurm_poll(db, [job(3, gpus_by_type={"2080_ti": 4}, **overcap)], [], [], at=100.0)
    # Requeued: squeue now lists what it asks for (--gpus-per-node=4, untyped).
    asks = job(3, state="PENDING", restarts=1, gpus_by_type={"": 4}, **overcap)
    (requeue,) = save_slurm_poll(db, [asks], [], [], at=115.0)
    assert (requeue.to_state, requeue.job.gpus_by_type) == ("REQUEUED", {"2080_ti": 4})
    assert load_snapshot(db, CLUSTER).jobs[0].gpus_by_type == {"": 4}  # the live view: its request


def test_an_ended_job_keeps_the_output_paths_squeue_listed(db_path: Path) -> None:
    """22.05's sacct has no --output/--error: a job's end record takes them from squeue's."""
    db = open_db(db_path)
    paths = {"std_out": "/o/%x-%j.out", "std_err": "/o/%x-%j.err", "work_dir": "/home/alice"}
    save_slurm_poll(db, [job(5, **paths)], [], [], at=100.0)
    ended = save_slurm_poll(db, [], [job(5, state="FAILED", work_dir="/home/alice")], [], at=115.0)
    assert [(t.job.std_out, t.job.std_err) for t in ended] == [("/o/%x-%j.out", "/o/%x-%j.err")]
    # Seen two polls ago only: the recorded transition remembers.
    save_slurm_poll(db, [job(6, state="PENDING", std_err="/o/e-%j")], [], [], at=130.0)
    save_slurm_poll(db, [], [], [], at=145.0)
    later = save_slurm_poll(db, [], [job(6, state="TIMEOUT")], [], at=160.0)
    assert [(t.job.std_out, t.job.std_err) for t in later] == [("", "/o/e-%j")]
    # sacct's own paths (24.11: stdout_expanded) are kept as they are.
    save_slurm_poll(db, [job(7, std_out="/o/%j.out")], [], [], at=175.0)
    own = save_slurm_poll(db, [], [job(7, state="FAILED", std_out="/o/7.out")], [], at=190.0)
    assert [t.job.std_out for t in own] == ["/o/7.out"]


def test_a_fresh_store_does_not_announce_jobs_that_ended_before_it_watched(
    db_path: Path,
) -> None:
    """squeue still lists a job for MinJobAge after it ended: on a brand-new store's first
    poll that is history, not news; a job that ends after the first poll is news."""
    db = open_db(db_path)
    ended_earlier = job(1, state="COMPLETED", start_time=900, end_time=990)
    first = save_slurm_poll(db, [ended_earlier, job(2)], [], [], at=1000.0)
    assert [(t.job.job_id, t.to_state) for t in first] == [(2, "RUNNING")]
    ended_now = job(2, state="COMPLETED", start_time=995, end_time=1010)
    second = save_slurm_poll(db, [ended_earlier, ended_now], [], [], at=1015.0)
    assert [(t.job.job_id, t.to_state) for t in second] == [(2, "COMPLETED")]
