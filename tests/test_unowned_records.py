"""A record with no user, account or partition is counted nowhere (issue 26, item 13).

It used to become `''` and be counted as a user `''` of its lab (or under an account `''`):
GPU figures and the weekly digest's GPU-hours named nobody. Such a record is now left out
where it is parsed, and named once in the log; the rest of the poll is read as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
from pathlib import Path
from typing import Any

import pytest

from scheduler.slurm.digester import PollDigester
from scheduler.slurm.wire import DigestRequest, LabLimits
from store.db import open_db
from store.slurm_writes import save_slurm_changes
from store.snapshots import load_snapshot
from tests.support.factories import CLUSTER

V42 = Path(__file__).parent / "fixtures" / "slurm" / "v0.0.42"
LIMITS = LabLimits(
    (("hoffman-lab", "hoffman-lab"), ("kira-lab", "kira-lab")),
    {"hoffman-lab": 4, "kira-lab": 4},
    {},
    "overcap",
)
VICTIM = 7  # alice's train-a40: RUNNING on clippy with 2 a40s, hoffman-lab
# Where each generation's squeue and sacct keep the owner fields.
SQUEUE_FIELDS = {"user": "user_name", "account": "account", "partition": "partition"}


def _digest(tmp_path: Path, squeue: Any, sacct: Any) -> tuple[Any, Any]:
    (tmp_path / "squeue.json").write_text(json.dumps(squeue))
    (tmp_path / "sacct.json").write_text(json.dumps(sacct))
    digest = PollDigester().digest(
        DigestRequest(
            squeue=(tmp_path / "squeue.json",),
            nodes=V42 / "nodes.json",
            sacct=tmp_path / "sacct.json",
            limits=LIMITS,
            base=None,
            nodes_command="scontrol",
        )
    )
    db = open_db(tmp_path / "skybot.db")
    save_slurm_changes(db, CLUSTER, digest.changes, 1000.0)
    return digest, load_snapshot(db, CLUSTER)


def _load(name: str) -> Any:
    return json.loads((V42 / name).read_text())


@pytest.mark.parametrize("missing", ["user", "account", "partition"])
def test_a_squeue_record_without_an_owner_is_counted_nowhere(tmp_path: Path, missing: str) -> None:
    squeue, sacct = _load("squeue.json"), _load("sacct.json")
    victim = next(job for job in squeue["jobs"] if job["job_id"] == VICTIM)
    victim[SQUEUE_FIELDS[missing]] = ""
    if missing == "user":
        del victim["user_id"]  # no uid either: nobody to count it for
    sacct["jobs"] = [job for job in sacct["jobs"] if job["job_id"] != VICTIM]
    digest, snapshot = _digest(tmp_path, squeue, sacct)

    ids = {job.job_id for job in snapshot.jobs}
    assert VICTIM not in ids and len(ids) == len(squeue["jobs"]) - 1
    assert not any("" in (job.user, job.account, job.partition) for job in snapshot.jobs)
    usage = {each.lab: each for each in digest.usages}
    assert "" not in usage["hoffman-lab"].by_user
    # alice's other a40 (job 14) and bob's (job 8) are still counted: 2, not 4.
    assert usage["hoffman-lab"].gpus_used == 2
    assert usage["kira-lab"].gpus_used == 4  # untouched
    (warning,) = [w for w in digest.warnings if f"job {VICTIM}" in w]
    assert f"no {missing}" in warning


@pytest.mark.parametrize("missing", ["user", "account", "partition"])
def test_a_sacct_record_without_an_owner_is_told_nowhere(tmp_path: Path, missing: str) -> None:
    squeue, sacct = _load("squeue.json"), _load("sacct.json")
    ended = next(job for job in sacct["jobs"] if job["state"]["current"] == ["COMPLETED"])
    ended[missing] = ""
    ended["association"][missing] = ""  # sacct falls back to the association
    digest, snapshot = _digest(tmp_path, squeue, sacct)

    assert ended["job_id"] not in {job.job_id for job in digest.changes.observed}
    assert any(f"job {ended['job_id']}" in w and f"no {missing}" in w for w in digest.warnings)
    assert len(snapshot.jobs) == len(squeue["jobs"])


@pytest.mark.parametrize("known", [True, False])
def test_a_squeue_record_with_a_uid_and_no_user_name_is_named_and_counted(
    tmp_path: Path, known: bool
) -> None:
    """slurmctld gives a uid but no user name (it could not look it up): the system's user
    database names it (issue 40), or failing that the uid, as Slurm's commands print it. It
    was dropped ("skipped: no user") and its GPUs vanished from /sky jobs and lab usage."""
    uid = os.getuid() if known else 3_999_999
    with contextlib.suppress(KeyError):
        assert known or pwd.getpwuid(uid) is None  # a uid this host does not know
    name = pwd.getpwuid(uid).pw_name if known else str(uid)
    squeue, sacct = _load("squeue.json"), _load("sacct.json")
    victim = next(job for job in squeue["jobs"] if job["job_id"] == VICTIM)
    victim["user_name"], victim["user_id"] = "", uid
    sacct["jobs"] = [job for job in sacct["jobs"] if job["job_id"] != VICTIM]
    digest, snapshot = _digest(tmp_path, squeue, sacct)

    (record,) = [job for job in snapshot.jobs if job.job_id == VICTIM]
    assert record.user == name and record.gpus == 2
    usage = {each.lab: each for each in digest.usages}
    assert usage["hoffman-lab"].gpus_used == 4  # alice's two a40s, bob's, and these two
    assert usage["hoffman-lab"].by_user.get(name) == 2
    assert not [w for w in digest.warnings if f"job {VICTIM}" in w]
