"""Rows keyed by cluster (issue 31): today's single-cluster database upgrades in place with
nothing lost, and two clusters with the same job ids and node names stay apart.

The upgraded database is tests/fixtures/pre_cluster_keys/database.sql, written by the release
before this change through its own store functions (record.py beside it says how).
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
import sqlite_utils

from core.config_schema import Config
from core.lab_usage import LabUsage
from core.records import LabCap
from core.snapshot_rows import SlurmChanges
from core.view import ClusterView
from scheduler.watchers.gpu_watches import check_gpu_watches
from scheduler.watchers.job_dms import notify_transitions
from store.alerts import advance_cursor, load_cap_episodes, load_cursor
from store.caps_and_storage import save_caps
from store.cluster_schema import CLUSTER_KEYS
from store.clusters import CLUSTER_TABLES, adopt_unnamed_rows
from store.db import MIGRATIONS, SCHEMA_VERSION, migrate, open_db
from store.history import lab_usage_samples, save_lab_usage
from store.identities import load_identities
from store.outbox import outbox_rows
from store.reader import SnapshotCache
from store.slurm_writes import history_start, save_slurm_changes
from store.snapshots import load_snapshot, load_source_status
from store.submissions import SUBMITTING, claim_next, interrupted
from store.transitions import last_job_record
from store.watches import NewWatch, active_watches, add_watch
from store.writer import StoreWriter
from tests.factories import CLUSTER, job, make_snapshot, make_view, node
from tests.slurm_polls import save_slurm_poll

FIXTURE = Path(__file__).parent / "fixtures" / "pre_cluster_keys" / "database.sql"
TARGETS = {"alice": [("T1", "UALICE")], "bob": [("T1", "UBOB")]}
LAB = "hoffman-lab"


def old_database(path: Path) -> dict[str, int]:
    """The previous release's database at `path`; how many rows each keyed table held."""
    conn = sqlite3.connect(path)
    conn.executescript(FIXTURE.read_text())
    counts = {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in CLUSTER_TABLES}
    conn.close()
    return counts


def notify_all(db: object, cluster: str) -> int:
    through = db.execute("SELECT MAX(id) FROM job_transitions").fetchone()[0]  # type: ignore[attr-defined]
    return notify_transitions(db, cluster, TARGETS, through, Config(), 400.0)  # type: ignore[arg-type]


def free_a40s_view() -> ClusterView:
    return make_view(
        make_snapshot(
            nodes=(node("gpu01", "a40"),),
            caps=(LabCap(LAB, 8),),
            members={LAB: {"alice", "bob"}},
        )
    )


def test_the_old_schema_is_the_one_before_this_migration() -> None:
    # Later migrations (store/db.py) run after it, on the same upgrade.
    before = MIGRATIONS.index(CLUSTER_KEYS)
    assert f"PRAGMA user_version = {before};" in FIXTURE.read_text()


def test_todays_database_upgrades_in_place_with_every_row_under_the_default_cluster(
    tmp_path: Path,
) -> None:
    path = tmp_path / "skybot.db"
    before = old_database(path)
    assert all(before[t] for t in ("jobs", "nodes", "job_transitions", "gpu_watches"))
    db = open_db(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert adopt_unnamed_rows(db, CLUSTER) == sum(before.values())
    assert adopt_unnamed_rows(db, CLUSTER) == 0  # idempotent: every start may call it
    for table in CLUSTER_TABLES:
        rows = dict(db.execute(f"SELECT cluster, COUNT(*) FROM {table} GROUP BY cluster"))
        assert rows == ({CLUSTER: before[table]} if before[table] else {}), table

    snapshot = load_snapshot(db, CLUSTER)
    assert [(j.job_id, j.state) for j in snapshot.jobs] == [(3, "PENDING")]
    assert [n.name for n in snapshot.nodes] == ["gpu01"]
    assert snapshot.caps == (LabCap(LAB, 8),) and snapshot.members == {LAB: {"alice", "bob"}}
    assert snapshot.source("slurm").taken_at == 300.0
    assert load_source_status(db, CLUSTER, "storage").error == "df: /data: timed out"
    assert last_job_record(db, CLUSTER, 2).state == "FAILED"  # type: ignore[union-attr]
    assert history_start(db, CLUSTER, 10_000.0) == 100.0  # not restarted: no old ends told
    assert load_cap_episodes(db, CLUSTER) == {LAB: 120.0}
    assert [s.gpus_used for s in lab_usage_samples(db, CLUSTER, LAB, 0, 1000)] == [2, 2]
    assert {(i.user_id, i.cluster_user) for i in load_identities(db)} == {
        ("UALICE", "alice"),
        ("UBOB", "bob"),
    }
    assert [s.script for s in interrupted(db, CLUSTER)] == ["/home/alice/first.sh"]
    queued = claim_next(db, CLUSTER, 500.0)
    assert queued is not None and queued.script == "/home/alice/second.sh"
    assert queued.cluster == CLUSTER and queued.state == SUBMITTING


def test_a_dm_queued_before_the_upgrade_is_not_enqueued_again_and_the_next_is(
    tmp_path: Path,
) -> None:
    path = tmp_path / "skybot.db"
    old_database(path)
    db = open_db(path)
    adopt_unnamed_rows(db, CLUSTER)
    queued = [r["key"] for r in outbox_rows(db, "queued")]
    assert queued == ["job:skynet:1:0:COMPLETED:T1:UALICE"]
    # The cursor came over: only job 2's end, recorded after the old notifier ran, is new.
    assert load_cursor(db, CLUSTER) == 3
    assert notify_all(db, CLUSTER) == 1
    keys = sorted(r["key"] for r in outbox_rows(db))
    assert keys == ["job:skynet:1:0:COMPLETED:T1:UALICE", "job:skynet:2:0:FAILED:T1:UBOB"]
    # Even from a lost cursor the same notices make the same keys: nothing is told twice.
    assert advance_cursor(db, CLUSTER, load_cursor(db, CLUSTER), 0)
    assert notify_all(db, CLUSTER) == 0
    assert sorted(r["key"] for r in outbox_rows(db)) == keys


async def test_a_watch_made_before_the_upgrade_still_fires_once(tmp_path: Path) -> None:
    path = tmp_path / "skybot.db"
    old_database(path)
    adopt_unnamed_rows(open_db(path), CLUSTER)
    writer = StoreWriter(path)
    try:
        (watch,) = await writer.run(active_watches, CLUSTER)
        assert (watch.user_id, watch.gpu_type, watch.count) == ("UALICE", "a40", 2)
        assert await check_gpu_watches(writer, free_a40s_view(), CLUSTER, now=400.0) == 1
        assert await check_gpu_watches(writer, free_a40s_view(), CLUSTER, now=401.0) == 0
        dms = [r for r in await writer.run(outbox_rows) if r["key"].startswith("watch:")]
        assert [r["target"] for r in dms] == ["UALICE"]
    finally:
        writer.close()


def test_rows_written_under_the_name_before_adoption_win_and_nothing_is_left_unnamed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "skybot.db"
    old_database(path)
    db = open_db(path)
    save_caps(db, CLUSTER, [LabCap(LAB, 12)], {LAB: ["carol"]}, 600.0)
    adopt_unnamed_rows(db, CLUSTER)
    assert load_snapshot(db, CLUSTER).caps == (LabCap(LAB, 12),)
    assert load_snapshot(db, CLUSTER).members == {LAB: {"alice", "bob", "carol"}}
    for table in CLUSTER_TABLES:
        assert not db.execute(f"SELECT COUNT(*) FROM {table} WHERE cluster = ''").fetchone()[0]


def test_adoption_refuses_an_empty_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        adopt_unnamed_rows(open_db(tmp_path / "s.db"), "")


def test_the_migration_runs_on_an_empty_database_of_the_previous_schema() -> None:
    db = open_db(":memory:")
    fresh = sqlite_utils.Database(memory=True)
    migrate(fresh, MIGRATIONS[:-1])
    migrate(fresh)
    schema = (
        "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
    )
    assert list(fresh.execute(schema)) == list(db.execute(schema))


# ------------------------------------------------------------------ two clusters, same ids


def two_clusters(db: object) -> None:
    """Job 1 and node gpu01 on both: alice's on "north", bob's on "south"."""
    for cluster, user in (("north", "alice"), ("south", "bob")):
        gpus = {"a40": 1}
        live = [job(1, user=user, gpus_by_type=gpus, start_time=95)]
        save_slurm_poll(db, live, [], [node("gpu01", "a40", used=1)], 100.0, cluster=cluster)  # type: ignore[arg-type]


def test_two_clusters_with_the_same_job_ids_and_node_names_keep_their_own_snapshots() -> None:
    db = open_db(":memory:")
    two_clusters(db)
    north, south = load_snapshot(db, "north"), load_snapshot(db, "south")
    assert [(j.job_id, j.user) for j in north.jobs] == [(1, "alice")]
    assert [(j.job_id, j.user) for j in south.jobs] == [(1, "bob")]
    assert [n.name for n in north.nodes] == [n.name for n in south.nodes] == ["gpu01"]
    # Job 1 ends on north only: south still lists its own job 1, with no transition.
    ended = replace(north.jobs[0], state="COMPLETED", end_time=150)
    save_slurm_poll(db, [], [ended], [node("gpu01", "a40")], 200.0, cluster="north")
    assert load_snapshot(db, "north").jobs == ()
    assert [j.state for j in load_snapshot(db, "south").jobs] == ["RUNNING"]
    assert last_job_record(db, "north", 1).state == "COMPLETED"  # type: ignore[union-attr]
    assert last_job_record(db, "south", 1).state == "RUNNING"  # type: ignore[union-attr]


def test_job_dms_of_two_clusters_are_keyed_apart_and_each_cursor_is_its_own() -> None:
    db = open_db(":memory:")
    two_clusters(db)
    for cluster in ("north", "south"):
        (running,) = load_snapshot(db, cluster).jobs
        ended = replace(running, state="FAILED", end_time=150)
        save_slurm_poll(db, [], [ended], [node("gpu01", "a40")], 200.0, cluster=cluster)
    assert notify_all(db, "north") == 1
    assert load_cursor(db, "south") == 0  # north's notifier did not move south's cursor
    assert notify_all(db, "south") == 1
    assert sorted((r["key"], r["target"]) for r in outbox_rows(db)) == [
        ("job:north:1:0:FAILED:T1:UALICE", "UALICE"),
        ("job:south:1:0:FAILED:T1:UBOB", "UBOB"),
    ]


async def test_a_watch_is_fired_only_by_its_own_clusters_gpus(tmp_path: Path) -> None:
    writer = StoreWriter(tmp_path / "skybot.db")
    try:
        new = NewWatch("T1", "UALICE", "alice", "a40", 2, False, LAB, LAB, LAB)
        await writer.run(add_watch, "north", new, 0.0, 3600.0, 5)
        assert await check_gpu_watches(writer, free_a40s_view(), "south", now=10.0) == 0
        assert [w.user_id for w in await writer.run(active_watches, "north")] == ["UALICE"]
        assert await writer.run(active_watches, "south") == []
        assert await check_gpu_watches(writer, free_a40s_view(), "north", now=11.0) == 1
    finally:
        writer.close()


def test_caps_and_history_of_two_clusters_stay_apart() -> None:
    db = open_db(":memory:")
    save_caps(db, "north", [LabCap(LAB, 8)], {LAB: ["alice"]}, 1.0)
    save_caps(db, "south", [LabCap(LAB, 2)], {LAB: ["bob"]}, 1.0)
    assert load_snapshot(db, "north").caps == (LabCap(LAB, 8),)
    assert load_snapshot(db, "south").members == {LAB: {"bob"}}
    for cluster, used in (("north", 3), ("south", 1)):
        save_lab_usage(db, cluster, [LabUsage(LAB, LAB, None, used)], 100.0, 30)
    assert [s.gpus_used for s in lab_usage_samples(db, "north", LAB, 0, 200)] == [3]
    assert [s.gpus_used for s in lab_usage_samples(db, "south", LAB, 0, 200)] == [1]


def test_each_clusters_reader_catches_up_with_its_own_rows_only(tmp_path: Path) -> None:
    path = tmp_path / "skybot.db"
    db = open_db(path)
    two_clusters(db)
    north, south = SnapshotCache(path, "north", ()), SnapshotCache(path, "south", ())
    assert [j.user for j in north.refresh_blocking().snapshot.jobs] == ["alice"]
    south_view = south.refresh_blocking()
    # Job 1 and gpu01 leave north in a poll of changes only; south's are untouched.
    gone = SlurmChanges(
        full=False, job_rows=(), gone_job_ids=(1,), node_rows=(), gone_nodes=("gpu01",),
        observed=(),
    )  # fmt: skip
    save_slurm_changes(db, "north", gone, 300.0)
    assert north.refresh_blocking().snapshot.jobs == ()
    assert north.current().snapshot.nodes == ()
    assert south.refresh_blocking() is south_view  # nothing new on south: not even reloaded
    assert [(j.job_id, j.user) for j in south_view.snapshot.jobs] == [(1, "bob")]
    north.close()
    south.close()
