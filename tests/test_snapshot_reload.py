"""Reloading the snapshot after a poll decodes only the jobs whose record changed, and the
view the loop answers from is computed before it is handed over."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from core.view import LabInfo
from store.db import open_db
from store.reader import SnapshotCache
from store.snapshots import save_slurm_poll
from tests.factories import job


def test_a_reload_reuses_unchanged_jobs_and_decodes_changed_ones(tmp_path: Path) -> None:
    path = tmp_path / "skybot.db"
    db = open_db(path)
    jobs = [job(job_id=i, state="RUNNING") for i in range(1, 4)]
    save_slurm_poll(db, jobs, [], [], at=1000.0)
    cache = SnapshotCache(path, (LabInfo("hoffman-lab", "hoffman-lab", "hoffman-lab"),))
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
