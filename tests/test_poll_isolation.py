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

from scheduler.poll_digest import DigestRequest, LabLimits, PollDigest, PollDigester
from scheduler.poll_worker import PollWorker
from store.db import open_db
from store.snapshots import load_snapshot, save_slurm_changes

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
    save_slurm_changes(db, digest.changes, 1000.0)

    snapshot = load_snapshot(db)
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
    save_slurm_changes(db, again.changes, 1015.0)
    assert not again.changes.full
    assert _naming(again, FIRST_RECORD) == []
    assert load_snapshot(db).status["slurm"].taken_at == 1015.0


def test_the_complete_record_is_told_once_it_arrives(tmp_path: Path) -> None:
    """Once slurmdbd has the controller's details, the same job is an ordinary record."""
    db = open_db(tmp_path / "skybot.db")
    digester = PollDigester()
    first = digester.digest(_request())
    save_slurm_changes(db, first.changes, 1000.0)
    document = json.loads((V40 / "sacct_allocation.json").read_text())
    record = next(job for job in document["jobs"] if job["job_id"] == FIRST_RECORD)
    record.update(name="late-train", partition="hoffman-lab")
    record["state"] = {"current": ["CANCELLED"], "reason": "None"}
    (tmp_path / "sacct.json").write_text(json.dumps(document))
    request = _request(base=first.generation)
    complete = digester.digest(
        DigestRequest(**{**_fields(request), "sacct": tmp_path / "sacct.json"})
    )
    save_slurm_changes(db, complete.changes, 1015.0)
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
