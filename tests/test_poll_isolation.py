"""One Slurm record a stage cannot use costs only itself (issue 26, item 1).

slurmdbd's first record of a job (`"name": "allocation"`, `"partition": ""`, real 23.11 and
24.05 output) used to reach the first digest after a start and fail it with
`KeyError(112)`: nothing was committed, so the next poll was again a first digest, and
skybot stayed blind (squeue and nodes too) for as long as the record was in sacct's window.
Each stage (parse, digest, merge, store) now drops such a record, names it once, and the
rest of the poll commits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.record_codec import decode_job, encode_record
from core.records import Job, Node
from core.transitions import merge_observations
from scheduler.slurm import diff
from scheduler.slurm.digester import PollDigester
from scheduler.slurm.wire import DigestRequest, LabLimits, PollDigest
from scheduler.slurm.worker import PollWorker
from store import unreadable
from store.db import open_db
from store.loaded_rows import DecodedRows
from store.row_log import RowChanges
from store.slurm_writes import save_slurm_changes
from store.snapshots import load_snapshot
from tests.support.factories import CLUSTER, job
from tests.support.slurm_polls import save_slurm_poll

V40 = Path(__file__).parent / "fixtures" / "slurm" / "v0.0.40"
LIMITS = LabLimits(
    (("hoffman-lab", "hoffman-lab"), ("kira-lab", "kira-lab")),
    {"hoffman-lab": 4, "kira-lab": 4},
    {},
    "overcap",
)
SQUEUE_IDS = sorted(job["job_id"] for job in json.loads((V40 / "squeue.json").read_text())["jobs"])
FIRST_RECORD = 112  # in sacct_allocation.json only: "allocation", no partition


def _request(base: Any = None, sacct: str = "sacct_allocation.json") -> DigestRequest:
    return DigestRequest(
        squeue=(V40 / "squeue.json",),
        nodes=V40 / "nodes.json",
        sacct=V40 / sacct,
        limits=LIMITS,
        base=base,
        nodes_command="scontrol",
    )


def _naming(digest: PollDigest, job_id: int) -> list[str]:
    return [w for w in digest.warnings if f"job {job_id}" in w]


def test_the_fixture_holds_slurmdbds_first_record() -> None:
    jobs = json.loads((V40 / "sacct_allocation.json").read_text())["jobs"]
    first = next(job for job in jobs if job["job_id"] == FIRST_RECORD)
    assert (first["name"], first["partition"]) == ("allocation", "")
    assert FIRST_RECORD not in SQUEUE_IDS


def test_a_first_record_does_not_blind_the_first_digest(tmp_path: Path) -> None:
    db = open_db(tmp_path / "skybot.db")
    digester = PollDigester()
    digest = digester.digest(_request())
    save_slurm_changes(db, CLUSTER, digest.changes, 1000.0)

    snapshot = load_snapshot(db, CLUSTER)
    assert sorted(job.job_id for job in snapshot.jobs) == SQUEUE_IDS
    assert {node.name for node in snapshot.nodes} >= {"clippy", "xaea-12", "baymax"}
    assert snapshot.status["slurm"].taken_at == 1000.0
    assert FIRST_RECORD not in {job.job_id for job in digest.changes.observed}
    states = dict(db.execute("SELECT job_id, state FROM job_states").fetchall())
    assert FIRST_RECORD not in states and states[108] == "COMPLETED"
    # Named once, saying why.
    (warning,) = _naming(digest, FIRST_RECORD)
    assert "partition" in warning

    # The next poll (the record still in sacct's window) commits on top and does not repeat it.
    again = digester.digest(_request(base=digest.generation))
    save_slurm_changes(db, CLUSTER, again.changes, 1015.0)
    assert not again.changes.full
    assert _naming(again, FIRST_RECORD) == []
    assert load_snapshot(db, CLUSTER).status["slurm"].taken_at == 1015.0


def test_the_complete_record_is_told_once_it_arrives(tmp_path: Path) -> None:
    """Once slurmdbd has the controller's details, the same job is an ordinary record."""
    db = open_db(tmp_path / "skybot.db")
    digester = PollDigester()
    first = digester.digest(_request())
    save_slurm_changes(db, CLUSTER, first.changes, 1000.0)
    document = json.loads((V40 / "sacct_allocation.json").read_text())
    record = next(job for job in document["jobs"] if job["job_id"] == FIRST_RECORD)
    record.update(name="late-train", partition="hoffman-lab")
    record["state"] = {"current": ["CANCELLED"], "reason": "None"}
    (tmp_path / "sacct.json").write_text(json.dumps(document))
    request = _request(base=first.generation)
    complete = digester.digest(
        DigestRequest(**{**_fields(request), "sacct": tmp_path / "sacct.json"})
    )
    save_slurm_changes(db, CLUSTER, complete.changes, 1015.0)
    assert _naming(complete, FIRST_RECORD) == []
    states = dict(db.execute("SELECT job_id, state FROM job_states").fetchall())
    assert states[FIRST_RECORD] == "CANCELLED"


async def test_the_worker_process_answers_a_first_digest_with_such_a_record(
    tmp_path: Path,
) -> None:
    worker = PollWorker()
    try:
        digest = await worker.digest(_request(), timeout=60)
    finally:
        await worker.close()
    assert digest.changes.full
    assert digest.jobs == len(SQUEUE_IDS)


def _fields(request: DigestRequest) -> dict[str, Any]:
    return {name: getattr(request, name) for name in DigestRequest.__slots__}


# --------------------------------------------------------------------------------------------
# Each stage on its own: a record it cannot use is left out and named; the rest commits.


def test_a_job_or_node_the_digest_cannot_encode_costs_only_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_job_row, real_node_row = diff.job_row, diff.node_row

    def job_row(job: Job) -> Any:
        if job.job_id == 103:
            raise OverflowError("int too big to convert")
        return real_job_row(job)

    def node_row(node: Node) -> Any:
        if node.name == "baymax":
            raise ValueError("a value msgspec cannot encode")
        return real_node_row(node)

    monkeypatch.setattr(diff, "job_row", job_row)
    monkeypatch.setattr(diff, "node_row", node_row)
    db = open_db(tmp_path / "skybot.db")
    digest = PollDigester().digest(_request(sacct="sacct.json"))
    save_slurm_changes(db, CLUSTER, digest.changes, 1000.0)

    snapshot = load_snapshot(db, CLUSTER)
    assert sorted(job.job_id for job in snapshot.jobs) == [i for i in SQUEUE_IDS if i != 103]
    assert {node.name for node in snapshot.nodes} == {"clippy", "xaea-12"}
    assert digest.jobs == len(SQUEUE_IDS) - 1
    (named,) = _naming(digest, 103)
    assert "OverflowError" in named
    assert any("node baymax" in w for w in digest.warnings)
    # Not counted in its lab either: job 103 held kira-lab's rtx_6000s.
    kira = next(usage for usage in digest.usages if usage.lab == "kira-lab")
    assert all(job_id != 103 for job_id in kira.by_user)


def test_the_merge_names_the_sacct_records_it_leaves_out() -> None:
    first_record = job(112, name="allocation", partition="", state="PENDING")
    ended = job(108, state="COMPLETED", exit_code=0)
    left_out: list[Job] = []
    merged = merge_observations([job(101)], [first_record, ended], left_out)
    assert sorted(merged) == [101, 108]
    assert left_out == [first_record]


def test_a_stored_state_that_is_not_a_state_costs_only_its_job(tmp_path: Path) -> None:
    db = open_db(tmp_path / "skybot.db")
    save_slurm_poll(db, [job(1), job(2), job(3)], [], [], at=100.0)
    # SQLite keeps whatever type a row is given: a hand edit, another version's writer.
    db.execute("UPDATE job_states SET restarts = 'zero' WHERE job_id = 2")
    ended = [job(i, state="COMPLETED", exit_code=0) for i in (1, 2, 3)]
    transitions = save_slurm_poll(db, [], ended, [], at=115.0)
    assert [(t.job.job_id, t.to_state) for t in transitions] == [(1, "COMPLETED"), (3, "COMPLETED")]
    assert load_snapshot(db, CLUSTER).status["slurm"].taken_at == 115.0


def test_a_stored_record_that_does_not_decode_costs_only_itself(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unreadable, "_named", set())  # what earlier tests had named
    db = open_db(tmp_path / "skybot.db")
    save_slurm_poll(db, [job(1), job(2, std_out="/o/2.out"), job(3)], [], [], at=100.0)
    db.execute('UPDATE jobs SET record = \'{"job_id": 2, "name": 7}\' WHERE job_id = 2')
    db.conn.commit()
    # Read whole (a reader's first load): the other jobs are there.
    assert [j.job_id for j in load_snapshot(db, CLUSTER).jobs] == [1, 3]
    # sacct tells job 2 ended after squeue dropped it: its last seen record is the bad row.
    transitions = save_slurm_poll(db, [job(1)], [job(2, state="FAILED", exit_code=1)], [], 115.0)
    assert [(t.job.job_id, t.to_state) for t in transitions] == [(2, "FAILED")]
    assert sum("job 2: its stored record cannot be read" in r.message for r in caplog.records) == 1


def test_the_readers_rows_leave_out_a_record_that_does_not_decode(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bot's reader catches up on each poll's rows (store/loaded_rows.py): one bad row
    must not fail every reload, whether read whole or as a poll's changes."""
    monkeypatch.setattr(unreadable, "_named", set())
    rows: DecodedRows[int, Job] = DecodedRows(decode_job, "job")
    good = {i: encode_record(job(i)) for i in (1, 2, 3)}
    rows.replace_all([(1, good[1]), (2, "{not json"), (3, good[3])])
    assert [j.job_id for j in rows.values()] == [1, 3]
    rows.apply(RowChanges(gone=[], written=[(2, good[2]), (3, '{"job_id": 3}')]))
    assert [j.job_id for j in rows.values()] == [1, 2]
    named = [r.message for r in caplog.records if "stored record cannot be read" in r.message]
    assert len(named) == 2 and "job 2" in named[0] and "job 3" in named[1]
