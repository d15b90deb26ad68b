"""Reloading the snapshot after a poll decodes only the jobs whose record changed, and the
view the loop answers from is computed before it is handed over."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.cluster_config import LabConfig
from core.lab_usage import idle_gpus
from core.snapshot_rows import SlurmChanges, job_row, node_row
from store import row_log
from store.db import open_db
from store.reader import SnapshotCache
from store.slurm_writes import save_slurm_changes
from store.snapshots import load_snapshot
from tests.support.empty_database import empty_database
from tests.support.factories import CLUSTER, job, node
from tests.support.slurm_polls import save_slurm_poll


def test_a_reload_reuses_unchanged_jobs_and_decodes_changed_ones(tmp_path: Path) -> None:
    path = tmp_path / "skybot.db"
    db = open_db(path)
    jobs = [job(job_id=i, state="RUNNING") for i in range(1, 4)]
    save_slurm_poll(db, jobs, [], [], at=1000.0)
    cache = SnapshotCache(path, CLUSTER, (LabConfig("hoffman-lab", "hoffman-lab", "hoffman-lab"),))
    before = {j.job_id: j for j in cache.refresh_blocking().snapshot.jobs}

    changed = replace(jobs[1], state="COMPLETED")
    save_slurm_poll(db, [jobs[0], changed, jobs[2]], [], [], at=1015.0)
    view = cache.refresh_blocking()
    after = {j.job_id: j for j in view.snapshot.jobs}

    assert after[1] is before[1] and after[3] is before[3]
    assert after[2] is not before[2] and after[2].state == "COMPLETED"
    assert after == {1: jobs[0], 2: changed, 3: jobs[2]}
    # Warmed off the loop: the lab's usage is already there for the first command.
    assert "hoffman-lab" in view._usage
    cache.close()
    db.close()


def test_a_reload_keeps_the_idle_gpus_while_no_node_changed(tmp_path: Path) -> None:
    path = tmp_path / "skybot.db"
    db = open_db(path)
    save_slurm_poll(db, [job(job_id=1)], [], [node("n1", "a40", used=1)], 1.0)
    cache = SnapshotCache(path, CLUSTER, ())
    before = cache.refresh_blocking()
    assert before.idle_by_type == {"a40": 3}

    _save(db, {2: "PENDING"}, gone=[], node_used={})
    jobs_changed = cache.refresh_blocking()
    assert jobs_changed.snapshot.version != before.snapshot.version
    assert jobs_changed.idle is before.idle

    _save(db, {}, gone=[], node_used={"n1": 4})
    node_changed = cache.refresh_blocking()
    assert node_changed.idle == [] and node_changed.idle_by_type == {}
    cache.close()
    db.close()


def _save(db: Any, written: dict[int, str], gone: list[int], node_used: dict[str, int]) -> None:
    """A poll of changes only: jobs written (id -> state) and deleted, nodes written."""
    changes = SlurmChanges(
        full=False,
        job_rows=[job_row(job(job_id=i, state=s)) for i, s in sorted(written.items())],
        gone_job_ids=gone,
        node_rows=[node_row(node(n, "a40", used=u)) for n, u in sorted(node_used.items())],
        gone_nodes=(),
        observed=(),
    )
    save_slurm_changes(db, CLUSTER, changes, at=1000.0)


def test_a_reload_after_a_poll_reads_only_the_rows_that_poll_wrote(tmp_path: Path) -> None:
    path = tmp_path / "skybot.db"
    db = open_db(path)
    save_slurm_poll(
        db, [job(job_id=i, state="RUNNING") for i in range(1, 101)], [], [node("n1", "a40")], 1.0
    )
    cache = SnapshotCache(path, CLUSTER, ())
    cache.refresh_blocking()
    _save(db, {7: "COMPLETING", 200: "PENDING"}, gone=[3], node_used={})
    statements: list[str] = []
    assert cache._db is not None
    cache._db.conn.set_trace_callback(statements.append)
    jobs = cache.refresh_blocking().snapshot.jobs

    assert [j.job_id for j in jobs] == [i for i in range(1, 101) if i != 3] + [200]
    assert {j.job_id: j.state for j in jobs}[7] == "COMPLETING"
    reads = [s for s in statements if "FROM jobs" in s]
    assert reads and all("written_in >" in s for s in reads), reads
    # ... through the index: the rows' version picks them, not a scan of every row.
    for read in reads:
        plan = " ".join(row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {read}"))
        assert "USING INDEX jobs_written_in" in plan and "SCAN jobs" not in plan, plan
    cache.close()
    db.close()


# One step of a store's life: a poll writing jobs (id -> state) and nodes (name -> GPUs
# in use), deleting jobs, or replacing everything; or the lagging reader catching up.
_ids = st.integers(1, 30)
_states = st.sampled_from(["PENDING", "RUNNING", "COMPLETED"])
_step = st.one_of(
    st.tuples(
        st.just("changes"),
        st.dictionaries(_ids, _states, max_size=5),
        st.lists(_ids, max_size=3),
        st.dictionaries(st.sampled_from(["n1", "n2", "n10", "é"]), st.integers(0, 4), max_size=2),
    ),
    st.tuples(st.just("full"), st.dictionaries(_ids, _states, max_size=8)),
    st.tuples(st.just("catch up")),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(_step, max_size=25))
def test_readers_catching_up_see_what_a_fresh_read_sees(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, steps: list[Any]
) -> None:
    # Deletions are logged for 3 versions here: the lagging reader falls behind that too.
    monkeypatch.setattr(row_log, "KEEP_VERSIONS", 3)
    path = empty_database(tmp_path_factory.mktemp("store") / "skybot.db")
    db = open_db(path)
    every_poll, lagging = SnapshotCache(path, CLUSTER, ()), SnapshotCache(path, CLUSTER, ())
    for step in steps:
        if step[0] == "changes":
            _save(db, step[1], step[2], step[3])
            readers = [every_poll]
        elif step[0] == "full":
            jobs = [job(job_id=i, state=s) for i, s in step[1].items()]
            save_slurm_poll(db, jobs, [], [node("n2", "a40")], at=1000.0)
            readers = [every_poll]
        else:
            readers = [lagging]
        fresh = load_snapshot(db, CLUSTER)
        for cache in readers:
            view = cache.refresh_blocking()
            assert view.snapshot.jobs == fresh.jobs
            assert view.snapshot.nodes == fresh.nodes
            assert view.idle == idle_gpus(fresh.nodes)
    every_poll.close()
    lagging.close()
    db.close()


@pytest.mark.parametrize("away", ["past the log", "over a full replacement"])
def test_a_reader_further_behind_than_the_log_reads_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, away: str
) -> None:
    monkeypatch.setattr(row_log, "KEEP_VERSIONS", 3)
    path = tmp_path / "skybot.db"
    db = open_db(path)
    save_slurm_poll(db, [job(job_id=i, state="RUNNING") for i in range(1, 6)], [], [], 1.0)
    cache = SnapshotCache(path, CLUSTER, ())
    cache.refresh_blocking()
    if away == "past the log":
        for gone in (1, 2, 3, 4):  # job 1's deletion drops out of the log
            _save(db, {}, gone=[gone], node_used={})
        expected = [5]
        # The log holds the last 3 versions' deletions only.
        assert db.execute("SELECT key FROM rows_gone ORDER BY key").fetchall() == [(2,), (3,), (4,)]
    else:
        save_slurm_poll(db, [job(job_id=i, state="PENDING") for i in (10, 11)], [], [], 2.0)
        expected = [10, 11]
    assert [j.job_id for j in cache.refresh_blocking().snapshot.jobs] == expected
    cache.close()
    db.close()
