"""GPUs that are not whole GPUs (issue 26 item 10): shards, and GPUs told by sacct alone.

The test clusters have no shards configured (and are shared: their config is not changed for
this), so the documents are the recorded ones with the fields Slurm writes for shards, in the
shapes of src/interfaces/gres.c `_node_gres_used` (a node's `gres_used`: one `alloc/avail`
per GPU for a shared GRES) and src/stepmgr/gres_stepmgr.c (a job's `gres_detail`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from core.gres_shares import partly_used_gpus
from core.slurm_decode import decode_slurm_json
from core.slurm_json import parse_sacct, parse_sinfo, parse_squeue
from core.view import ClusterView
from handlers.commands import command_table
from store.db import open_db
from store.snapshots import load_snapshot
from tests.support.asking import answer_from_view
from tests.support.factories import CLUSTER, LABS
from tests.support.slurm_polls import save_slurm_poll

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"


def _load(version: str, name: str) -> Any:
    return json.loads((FIXTURES / version / name).read_text())


def _nodes(version: str, gres: str, gres_used: str) -> dict[str, Any]:
    """The recorded nodes, clippy (4 a40) configured with 16 shards and using some."""
    document = _load(version, "nodes.json" if version == "v0.0.42" else "sinfo.json")
    (clippy,) = [node for node in document["nodes"] if node["name"] == "clippy"]
    clippy["gres"], clippy["gres_used"] = gres, gres_used
    return document


def _clippy(document: dict[str, Any]) -> Any:
    nodes = parse_sinfo(decode_slurm_json(json.dumps(document))).records
    return next(node for node in nodes if node.name == "clippy")


@pytest.mark.parametrize(
    ("version", "gres", "gres_used", "idle"),
    [
        # One a40 whole, shards on two others: one a40 is idle, not three.
        ("v0.0.42", "gpu:a40:4,shard:a40:16", "gpu:a40:1(IDX:0),shard:a40:3(0/4,2/4,1/4,0/4)", 1),
        # 22.05's sockets in the totals; shards configured untyped ("(null)") on typed GPUs.
        (
            "v0.0.38",
            "gpu:a40:4(S:0),shard:16(S:0)",
            "gpu:a40:0(IDX:N/A),shard:(null):5(4/4,1/4,0/4,0/4)",
            2,
        ),
        # No device files, no per-GPU counts: 5 shards of 4 per GPU take at least 2 GPUs.
        ("v0.0.42", "gpu:a40:4,shard:a40:16", "gpu:a40:0,shard:a40:5", 2),
        # Shards configured, none in use: every GPU idle.
        ("v0.0.42", "gpu:a40:4,shard:a40:16", "gpu:a40:0(IDX:N/A),shard:a40:0(0/4,0/4,0/4,0/4)", 4),
    ],
)
def test_partly_used_gpus_are_not_idle(version: str, gres: str, gres_used: str, idle: int) -> None:
    clippy = _clippy(_nodes(version, gres, gres_used))
    assert clippy.gpus_idle == {"a40": idle}


def test_idle_gpus_in_sky_free_leave_shared_gpus_out() -> None:
    document = _nodes(
        "v0.0.42", "gpu:a40:4,shard:a40:16", "gpu:a40:0(IDX:N/A),shard:a40:3(1/4,1/4,1/4,0/4)"
    )
    for node in document["nodes"]:
        node["state"] = ["IDLE"] if node["name"] != "clippy" else ["MIXED"]
    view = _view(document, [])
    assert view.idle_by_type.get("a40") == 1


def test_a_gpu_is_never_counted_both_whole_and_shared() -> None:
    assert (
        partly_used_gpus("gpu:a40:2,shard:a40:8", "gpu:a40:2,shard:a40:1", {"a40": 2}, {"a40": 2})
        == {}
    )


def _shard_job(document: dict[str, Any], pending: bool = False) -> dict[str, Any]:
    """The recorded 24.11 squeue's first running job turned into a shard-only job."""
    running = next(j for j in document["jobs"] if j["job_state"] == ["RUNNING"])
    job = copy.deepcopy(running)
    job["job_id"] = 9001
    job["nodes"] = "clippy"
    job["tres_per_node"] = "gres/shard:2"
    job["tres_per_job"] = ""
    job["tres_req_str"] = "cpu=1,mem=1000M,node=1,billing=1,gres/shard=2"
    if pending:
        job["job_state"] = ["PENDING"]
        job["tres_alloc_str"] = ""
        job["gres_detail"] = []
    else:
        job["tres_alloc_str"] = "cpu=1,mem=1000M,node=1,billing=1,gres/shard=2"
        job["gres_detail"] = ["shard:a40:2(0/4,2/4,0/4,0/4)"]
    return job


def _view(nodes: dict[str, Any], jobs: list[dict[str, Any]]) -> ClusterView:
    db = open_db(":memory:")
    live = parse_squeue({"jobs": jobs}).records
    save_slurm_poll(db, live, [], parse_sinfo(decode_slurm_json(json.dumps(nodes))).records, 1000.0)
    return ClusterView(load_snapshot(db, CLUSTER), LABS)


def test_a_shard_job_shows_its_shards() -> None:
    squeue = _load("v0.0.42", "squeue.json")
    running, pending = _shard_job(squeue), _shard_job(squeue, pending=True)
    pending["job_id"] = 9002
    jobs = {job.job_id: job for job in parse_squeue({"jobs": [running, pending]}).records}
    assert jobs[9001].shards_by_type == {"a40": 2} and jobs[9001].gpus == 0
    assert jobs[9002].shards_by_type == {"": 2}
    user = running["user_name"]
    view = _view(_load("v0.0.42", "nodes.json"), [running, pending])
    reply = answer_from_view(
        command_table(), view, f"jobs {user}", team_id="T1", user_id="U1",
        cluster_user=user, now=1010.0,
    )  # fmt: skip
    assert "`shard:a40:2`" in reply.text and "`shard:2`" in reply.text
    assert "no GPUs" not in reply.text


def test_sacct_names_a_jobs_shards() -> None:
    sacct = _load("v0.0.42", "het_ended_sacct.json")
    record = copy.deepcopy(sacct["jobs"][0])
    record["het"] = {"job_id": 0, "job_offset": {"set": False, "infinite": False, "number": 0}}
    record["tres"]["allocated"] = [
        {"type": "cpu", "name": "", "id": 1, "count": 1},
        {"type": "gres", "name": "shard", "id": 1005, "count": 3},
    ]
    (job,) = parse_sacct({"jobs": [record]}).records
    assert job.shards_by_type == {"": 3} and job.gpus == 0


def test_a_job_first_seen_ended_takes_its_gpus_from_sacct() -> None:
    """squeue's record of an ended job (kept for MinJobAge) may name no GPUs: Slurm empties
    gres_detail, and tres_alloc_str lists gres/gpu only where AccountingStorageTRES tracks
    it. sacct's allocated TRES does: the end is told with them."""
    ended = copy.deepcopy(_load("v0.0.38", "het_ended_squeue.json")["jobs"][0])
    accounted = copy.deepcopy(_load("v0.0.38", "het_ended_sacct.json")["jobs"])
    for record in (ended, *accounted):
        record.pop("het_job_id", None)
        record.pop("het", None)
    ended["gres_detail"] = []
    ended["tres_alloc_str"] = "cpu=1,mem=1000M,node=1,billing=1"
    ended["tres_req_str"] = "cpu=1,mem=1000M,node=1,billing=1"
    ended["tres_per_node"] = ""
    (listed,) = parse_squeue({"jobs": [ended]}).records
    assert listed.state == "FAILED" and not listed.gpus_by_type
    sacct = [j for j in parse_sacct({"jobs": accounted}).records if j.job_id == listed.job_id]
    db = open_db(":memory:")
    (transition,) = save_slurm_poll(db, [listed], sacct, [], 1000.0)
    assert transition.job.gpus_by_type == {"2080_ti": 1}
