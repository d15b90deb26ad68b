"""core.slurm_json against every Slurm JSON shape the cluster may produce.

Fixtures (see tests/fixtures/slurm/README.md):
  v0.0.40            built from Slurm's data_parser sources for 23.11;
  v0.0.38 / v0.0.42  recorded from the real 22.05 and 24.11 test clusters (the 24.11
                     recordings have their own tests, tests/test_slurm_json_2411.py).
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.records import Job, Node
from core.slurm_decode import decode_slurm_json
from core.slurm_json import (
    ParseResult,
    SlurmJsonError,
    parse_sacct,
    parse_sinfo,
    parse_squeue,
)

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"
# The hand-written data_parser documents (one cluster state the tests below know by heart).
# v0.0.42 was hand-written too until the 24.11 cluster recorded it.
NEW_VERSIONS = ["v0.0.40"]
RECORDED_2411 = "v0.0.42"


def load(version: str, name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / version / name).read_text())


def by_id(result: ParseResult[Job]) -> dict[int, Job]:
    return {job.job_id: job for job in result.records}


def by_name(result: ParseResult[Node]) -> dict[str, Node]:
    return {node.name: node for node in result.records}


# ---------------------------------------------------------------------------------------------
# squeue, 23.11 and 24.11+ shapes

# job_id: (user, account, partition, state, reason, gpus_by_type)
SQUEUE_EXPECTED: dict[int, tuple[str, str, str, str, str, dict[str, int]]] = {
    # --gpus-per-node=a40:2, running: allocation
    101: ("alice", "hoffman-lab", "hoffman-lab", "RUNNING", "", {"a40": 2}),
    # --gpus=1 (tres_per_job, no tres_per_node): the type comes from the allocation
    102: ("bob", "kira-lab", "kira-lab", "RUNNING", "", {"rtx_6000": 1}),
    # --gres=gpu:2080_ti:3
    103: ("carol", "kira-lab", "kira-lab", "RUNNING", "", {"2080_ti": 3}),
    # pending over the lab cap: what it asked for
    104: ("dave", "hoffman-lab", "hoffman-lab", "PENDING", "AssocGrpGRES", {"a40": 4}),
    # preempted + requeued: ["PENDING", "REQUEUED"]; stale tres_alloc_str must not count
    105: ("alice", "overcap", "overcap", "PENDING", "BeginTime", {"": 2}),
    # pending array, --gpus-per-task=1 with -c 2 ("cpu=2,gres/gpu=1")
    106: ("bob", "kira-lab", "kira-lab", "PENDING", "Resources", {"": 1}),
    107: ("bob", "kira-lab", "kira-lab", "RUNNING", "", {"rtx_6000": 1}),
    108: ("carol", "kira-lab", "kira-lab", "COMPLETED", "", {"2080_ti": 1}),
    109: ("dave", "hoffman-lab", "hoffman-lab", "FAILED", "NonZeroExitCode", {"a40": 1}),
    110: ("bob", "kira-lab", "kira-lab", "CANCELLED", "", {"rtx_6000": 1}),
    # 2 nodes x --gpus-per-node=2
    111: ("dave", "hoffman-lab", "hoffman-lab", "PENDING", "Priority", {"": 4}),
}


@pytest.mark.parametrize("version", NEW_VERSIONS)
def test_squeue_jobs(version: str) -> None:
    result = parse_squeue(load(version, "squeue.json"))
    assert result.warnings == []
    jobs = by_id(result)
    assert sorted(jobs) == sorted(SQUEUE_EXPECTED)
    for job_id, (user, account, partition, state, reason, gpus) in SQUEUE_EXPECTED.items():
        job = jobs[job_id]
        got = (job.user, job.account, job.partition, job.state, job.reason, job.gpus_by_type)
        assert got == (user, account, partition, state, reason, gpus), job_id


@pytest.mark.parametrize("version", NEW_VERSIONS)
def test_squeue_details(version: str) -> None:
    jobs = by_id(parse_squeue(load(version, "squeue.json")))
    train = jobs[101]
    assert train.name == "train-vit"
    assert train.nodes == "clippy"
    assert train.submit_time == 1732868400
    assert train.start_time == 1732868500
    assert train.time_limit_minutes == 1440
    assert train.std_out == "/srv/share/alice/vit/slurm-101.out"
    assert train.work_dir == "/srv/share/alice/vit"
    assert (train.array_job_id, train.array_task) == (None, None)
    assert (train.exit_code, train.exit_signal) == (None, None)  # still running
    assert jobs[104].start_time is None  # unset start is None, not 0
    assert jobs[104].nodes == ""
    assert jobs[105].restarts == 1
    assert (jobs[106].array_job_id, jobs[106].array_task) == (106, "1-9")
    assert (jobs[107].array_job_id, jobs[107].array_task) == (106, "0")


@pytest.mark.parametrize("version", NEW_VERSIONS)
def test_squeue_exit_codes_of_finished_jobs(version: str) -> None:
    jobs = by_id(parse_squeue(load(version, "squeue.json")))
    assert (jobs[108].exit_code, jobs[108].exit_signal) == (0, None)
    assert (jobs[109].exit_code, jobs[109].exit_signal) == (2, None)
    # Cancelled: sacct -X shows the job's own 0:0 (real 22.05 cluster), not the step's TERM.
    assert (jobs[110].exit_code, jobs[110].exit_signal) == (0, None)


# ---------------------------------------------------------------------------------------------
# sacct


@pytest.mark.parametrize("version", NEW_VERSIONS)
def test_sacct_jobs(version: str) -> None:
    result = parse_sacct(load(version, "sacct.json"))
    assert result.warnings == []
    jobs = by_id(result)
    assert sorted(jobs) == [101, 103, 104, 105, 106, 107, 108, 109, 110]
    for job_id, job in jobs.items():
        user, account, partition, state, reason, gpus = SQUEUE_EXPECTED[job_id]
        got = (job.user, job.account, job.partition, job.state, job.reason, job.gpus_by_type)
        assert got == (user, account, partition, state, reason, gpus), job_id
    assert jobs[104].nodes == ""  # "None assigned"
    assert jobs[101].end_time is None
    assert jobs[108].end_time == 1732870800
    assert (jobs[106].array_job_id, jobs[106].array_task) == (106, "1-9")
    assert (jobs[107].array_job_id, jobs[107].array_task) == (106, "0")
    assert jobs[110].work_dir == "/srv/share2/bob/nb"


@pytest.mark.parametrize("version", NEW_VERSIONS)
def test_sacct_exit_codes_come_from_the_job_not_its_steps(version: str) -> None:
    jobs = by_id(parse_sacct(load(version, "sacct.json")))
    assert (jobs[108].exit_code, jobs[108].exit_signal) == (0, None)
    assert (jobs[109].exit_code, jobs[109].exit_signal) == (2, None)
    # Cancelled: sacct -X shows the job's own 0:0 (real 22.05 cluster), not the step's TERM.
    assert (jobs[110].exit_code, jobs[110].exit_signal) == (0, None)
    assert jobs[101].exit_code is None


def test_sacct_restarts_and_stdout_exist_only_from_24_05() -> None:
    old = by_id(parse_sacct(load("v0.0.40", "sacct.json")))
    assert old[105].restarts == 0 and old[105].std_out == ""
    # The 24.11 side (restart_cnt, stdout_expanded): tests/test_slurm_json_2411.py.


def test_sacct_duplicate_runs_count_as_restarts() -> None:
    doc = load("v0.0.40", "sacct.json")
    requeued = next(j for j in doc["jobs"] if j["job_id"] == 105)
    old_run = copy.deepcopy(requeued)
    old_run["state"] = {"current": ["PREEMPTED"], "reason": "None"}
    doc["jobs"].insert(0, old_run)  # sacct --duplicates lists older runs first
    jobs = by_id(parse_sacct(doc))
    assert jobs[105].state == "PENDING"
    assert jobs[105].restarts == 1
    assert len([j for j in parse_sacct(doc).records if j.job_id == 105]) == 1


# ---------------------------------------------------------------------------------------------
# job comments: skybot tags its submissions "skybot:<hex>" to find them after a crash

TAG = "skybot:5f3a9c01"


@pytest.mark.parametrize("version", ["v0.0.38", *NEW_VERSIONS])
def test_squeue_comment(version: str) -> None:
    doc = load(version, "squeue.json")
    doc["jobs"][0]["comment"] = TAG  # a string in every squeue version
    result = parse_squeue(doc)
    assert result.warnings == []
    assert result.records[0].comment == TAG
    assert all(job.comment == "" for job in result.records[1:])
    assert parse_squeue(decode_slurm_json(json.dumps(doc))).records[0].comment == TAG


@pytest.mark.parametrize("version", ["v0.0.38", *NEW_VERSIONS])
def test_sacct_comment_is_the_job_comment(version: str) -> None:
    doc = load(version, "sacct.json")
    # {"administrator", "job", "system"}; 22.05 has nulls where newer versions have ""
    doc["jobs"][0]["comment"] = {"administrator": "admin note", "job": TAG, "system": "sys"}
    result = parse_sacct(doc)
    assert result.warnings == []
    by_job = {job.job_id: job for job in result.records}
    assert by_job[doc["jobs"][0]["job_id"]].comment == TAG
    assert sum(job.comment == TAG for job in result.records) == 1
    assert parse_sacct(decode_slurm_json(json.dumps(doc))) == result


def test_comment_shapes_are_read_in_either_command() -> None:
    as_dict = {"administrator": None, "job": TAG, "system": None}
    assert only_job(parse_squeue(squeue_2205(comment=as_dict))).comment == TAG
    assert only_job(parse_squeue(squeue_2205(comment=None))).comment == ""
    flat = parse_sacct({"jobs": [sacct_2205_job(comment=TAG)]})
    assert only_job(flat).comment == TAG
    unset = parse_sacct({"jobs": [sacct_2205_job(comment={"job": None})]})
    assert only_job(unset).comment == ""
    odd = parse_squeue(squeue_2205(comment=17))
    assert odd.records[0].comment == ""
    assert odd.warnings == ["job 7: ignoring comment 17 (not a string)"]


# ---------------------------------------------------------------------------------------------
# nodes: sinfo list shape and {"nodes": [...]} shape

NODES_EXPECTED = {
    "clippy": ("MIXED", ("hoffman-lab", "overcap"), {"a40": 4}, {"a40": 2}, 32, 2),
    "xaea-12": ("MIXED", ("kira-lab", "overcap"), {"rtx_6000": 4}, {"rtx_6000": 2}, 32, 3),
    "baymax": ("MIXED+DRAIN", ("kira-lab", "overcap"), {"2080_ti": 4}, {"2080_ti": 3}, 24, 4),
}


@pytest.mark.parametrize("version", NEW_VERSIONS)
@pytest.mark.parametrize("name", ["sinfo.json", "nodes.json"])
def test_nodes(version: str, name: str) -> None:
    result = parse_sinfo(load(version, name))
    assert result.warnings == []
    nodes = by_name(result)
    assert sorted(nodes) == sorted(NODES_EXPECTED)
    for node_name, expected in NODES_EXPECTED.items():
        n = nodes[node_name]
        assert (n.state, n.partitions, n.gpus_total, n.gpus_used, n.cpus, n.cpus_allocated) == (
            expected
        ), node_name
    assert nodes["clippy"].gpus_idle == {"a40": 2}
    assert nodes["baymax"].gpus_idle == {"2080_ti": 0}  # draining: nothing schedulable


def test_sinfo_groups_of_several_nodes_are_split() -> None:
    entry = load("v0.0.40", "sinfo.json")["sinfo"][0]
    entry["nodes"]["nodes"] = ["gpu[01-02]", "gpu07"]
    entry["cpus"].update({"total": 96, "allocated": 6, "maximum": 32})
    result = parse_sinfo({"sinfo": [entry]})
    assert [n.name for n in result.records] == ["gpu01", "gpu02", "gpu07"]
    assert all(n.cpus == 32 and n.cpus_allocated == 2 for n in result.records)
    assert all(n.gpus_total == {"a40": 4} for n in result.records)


# ---------------------------------------------------------------------------------------------
# 22.05 (v0.0.38) shapes, written from openapi/v0.0.38 jobs.c / nodes.c and dbv0.0.38 parse.c


def squeue_2205(**fields: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "account": "hoffman-lab",
        "array_job_id": 0,
        "array_task_id": None,
        "array_task_string": "",
        "job_id": 7,
        "job_state": "RUNNING",
        "name": "j",
        "node_count": 1,
        "nodes": "clippy",
        "partition": "hoffman-lab",
        "restart_cnt": 0,
        "state_reason": "None",
        "submit_time": 1700000000,
        "start_time": 1700000010,
        "end_time": 1700003610,
        "exit_code": 0,
        "tasks": 1,
        "time_limit": 60,
        "tres_per_job": "",
        "tres_per_node": "",
        "tres_per_task": "",
        "tres_req_str": "cpu=1,mem=1000M,node=1,billing=1",
        "tres_alloc_str": "cpu=1,mem=1000M,node=1,billing=1",
        "gres_detail": [],
        "user_name": "alice",
        "standard_output": "/srv/share/alice/slurm-7.out",
        "current_working_directory": "/srv/share/alice",
    }
    job.update(fields)
    return {"meta": {"plugin": {"type": "openapi/v0.0.38"}}, "errors": [], "jobs": [job]}


def only_job(result: ParseResult[Job]) -> Job:
    assert result.warnings == []
    assert len(result.records) == 1
    return result.records[0]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # --gpus-per-node=a40:2 on 2 nodes, pending: requested x node count
        (
            {"job_state": "PENDING", "tres_per_node": "gres:gpu:a40:2", "node_count": 2},
            {"a40": 4},
        ),
        # --gpus=1: tres_per_job, tres_per_node empty
        ({"job_state": "PENDING", "tres_per_job": "gres:gpu:1"}, {"": 1}),
        # --gres=gpu:rtx_6000:3
        ({"job_state": "PENDING", "tres_per_node": "gres:gpu:rtx_6000:3"}, {"rtx_6000": 3}),
        # --gpus-per-task=1 -n 4
        ({"job_state": "PENDING", "tres_per_task": "gres:gpu:1", "tasks": 4}, {"": 4}),
        # untyped ask, typed controller total: the type is taken from tres_req_str
        (
            {
                "job_state": "PENDING",
                "tres_per_job": "gres:gpu:2",
                "tres_req_str": "cpu=1,node=1,gres/gpu=2,gres/gpu:a40=2",
            },
            {"a40": 2},
        ),
        # running: allocation wins, typed entry not double counted with the untyped total
        (
            {
                "tres_per_job": "gres:gpu:2",
                "tres_alloc_str": "cpu=2,mem=2000M,node=1,billing=2,gres/gpu=2,gres/gpu:a40=2",
                "gres_detail": ["gpu:a40:2(IDX:0-1)"],
            },
            {"a40": 2},
        ),
        # running without tres_alloc_str: gres_detail (commas inside IDX don't split)
        (
            {"tres_alloc_str": "", "gres_detail": ["gpu:a40:2(IDX:0,2)", "gpu:a40:1(IDX:3)"]},
            {"a40": 3},
        ),
        # GPUs not tracked by accounting (no gres/gpu in tres_alloc_str): gres_detail counts
        (
            {"tres_alloc_str": "cpu=2,mem=2000M,node=1", "gres_detail": ["gpu:a40:1(IDX:3)"]},
            {"a40": 1},
        ),
        # running, nothing about the allocation: what was asked for
        ({"tres_alloc_str": None, "gres_detail": None, "tres_per_node": "gres:gpu:2"}, {"": 2}),
        # only part of the GPUs typed: the rest stays untyped
        ({"tres_alloc_str": "cpu=1,gres/gpu=3,gres/gpu:a40=2"}, {"a40": 2, "": 1}),
        # CPU-only job
        ({"tres_alloc_str": "cpu=4,mem=4000M,node=1,billing=4"}, {}),
    ],
)
def test_2205_gpu_counting(fields: dict[str, Any], expected: dict[str, int]) -> None:
    assert only_job(parse_squeue(squeue_2205(**fields))).gpus_by_type == expected


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("RUNNING", "RUNNING"),
        ("REQUEUED", "PENDING"),  # 22.05 prints the flag instead of the base state
        ("COMPLETING", "COMPLETING"),
        ("CONFIGURING", "CONFIGURING"),
        (["PENDING", "REQUEUED"], "PENDING"),
        (["COMPLETED", "COMPLETING"], "COMPLETING"),
        (["RUNNING", "CONFIGURING"], "CONFIGURING"),
        (["CANCELLED"], "CANCELLED"),
        ("timeout", "TIMEOUT"),
    ],
)
def test_job_states(state: object, expected: str) -> None:
    assert only_job(parse_squeue(squeue_2205(job_state=state))).state == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (0, (0, None)),
        (256, (1, None)),  # wait status: exit status in the high byte
        (2 << 8, (2, None)),
        (9, (0, 9)),  # killed by SIGKILL
        (None, (None, None)),
    ],
)
def test_2205_squeue_exit_code_is_a_wait_status(raw: int | None, expected: tuple) -> None:
    job = only_job(parse_squeue(squeue_2205(job_state="FAILED", exit_code=raw)))
    assert (job.exit_code, job.exit_signal) == expected


def test_2205_squeue_other_fields() -> None:
    job = only_job(
        parse_squeue(
            squeue_2205(
                job_id=12,
                array_job_id=10,
                array_task_id=2,
                time_limit=None,  # INFINITE
                restart_cnt=3,
                end_time=0,
                state_reason="None",
            )
        )
    )
    assert (job.array_job_id, job.array_task) == (10, "2")
    assert job.time_limit_minutes is None
    assert job.restarts == 3
    assert job.end_time is None
    assert job.reason == ""
    assert job.std_out == "/srv/share/alice/slurm-7.out"


def sacct_2205_job(**fields: Any) -> dict[str, Any]:
    tres = [
        {"type": "cpu", "name": None, "id": 1, "count": 2},
        {"type": "gres", "name": "gpu", "id": 1001, "count": 3},
        {"type": "gres", "name": "gpu:a40", "id": 1002, "count": 3},
    ]
    job: dict[str, Any] = {
        "account": "hoffman-lab",
        "array": {
            "job_id": 0,
            "limits": {"max": {"running": {"tasks": 0}}},
            "task_id": None,
            "task": None,
        },
        "association": {
            "account": "hoffman-lab",
            "cluster": "c",
            "partition": None,
            "user": "carol",
        },
        "exit_code": {"status": "SUCCESS", "return_code": 0},
        "job_id": 42,
        "name": "train",
        "nodes": "clippy",
        "partition": "hoffman-lab",
        "state": {"current": "COMPLETED", "reason": "None"},
        "steps": [
            {
                "step": {"id": "42.batch"},
                "state": "FAILED",
                "exit_code": {"status": "ERROR", "return_code": 1},
            }
        ],
        "time": {
            "submission": 1700000000,
            "start": 1700000005,
            "end": 1700000500,
            "limit": None,
            "elapsed": 495,
        },
        "tres": {"allocated": tres, "requested": tres},
        "user": "carol",
        "working_directory": "/srv/share/carol",
    }
    job.update(fields)
    return job


def test_2205_sacct_shape() -> None:
    signaled = sacct_2205_job(
        job_id=43,
        state={"current": "FAILED", "reason": "None"},
        exit_code={"status": "SIGNALED", "signal": {"signal_id": 9, "name": "Killed"}},
    )
    pending = sacct_2205_job(
        job_id=44,
        state={"current": "PENDING", "reason": "AssocGrpGRES"},
        nodes="None assigned",
        exit_code={"status": "PENDING"},
        tres={"allocated": [], "requested": [{"type": "gres", "name": "gpu", "count": 8}]},
    )
    result = parse_sacct({"jobs": [sacct_2205_job(), signaled, pending]})
    assert result.warnings == []
    jobs = by_id(result)
    done = jobs[42]
    assert (done.user, done.state, done.gpus_by_type) == ("carol", "COMPLETED", {"a40": 3})
    assert (done.exit_code, done.exit_signal) == (0, None)  # the job's code, not its step's
    assert done.time_limit_minutes is None
    assert (done.submit_time, done.start_time, done.end_time) == (
        1700000000,
        1700000005,
        1700000500,
    )
    assert (jobs[43].exit_code, jobs[43].exit_signal) == (0, 9)  # sacct -X: "0:9"
    assert (jobs[44].state, jobs[44].reason, jobs[44].nodes) == ("PENDING", "AssocGrpGRES", "")
    assert jobs[44].gpus_by_type == {"": 8}


def test_2205_nodes_shape() -> None:
    doc = {
        "nodes": [
            {
                "name": "clippy",
                "state": "mixed",
                "state_flags": ["DRAIN"],
                "partitions": ["hoffman-lab", "overcap"],
                "gres": "gpu:a40:4(S:0)",
                "gres_used": "gpu:a40:2(IDX:0-1)",
                "cpus": 32,
                "alloc_cpus": 3,
            },
            {
                "name": "plain",
                "state": "idle",
                "state_flags": [],
                "partitions": [],
                "gres": "gpu:4",
                "gres_used": "gpu:(null):0(IDX:N/A)",
                "cpus": 8,
                "alloc_cpus": 0,
            },
        ]
    }
    result = parse_sinfo(doc)
    assert result.warnings == []
    clippy, plain = result.records
    assert clippy.state == "MIXED+DRAIN"
    assert not clippy.schedulable
    assert (clippy.gpus_total, clippy.gpus_used) == ({"a40": 4}, {"a40": 2})
    assert clippy.partitions == ("hoffman-lab", "overcap")
    assert (clippy.cpus, clippy.cpus_allocated) == (32, 3)
    assert (plain.state, plain.gpus_total, plain.gpus_used) == ("IDLE", {"": 4}, {})


# ---------------------------------------------------------------------------------------------
# the slim msgspec decode (core.slurm_decode) keeps every field the parsers read


FIXTURE_DOCUMENTS = sorted(
    path.relative_to(FIXTURES)
    for kind in ("squeue", "sacct", "sinfo", "nodes")
    for path in FIXTURES.glob(f"*/{kind}.json")
)
PARSERS = {"squeue": parse_squeue, "sacct": parse_sacct, "sinfo": parse_sinfo, "nodes": parse_sinfo}


@pytest.mark.parametrize("document", FIXTURE_DOCUMENTS, ids=str)
def test_slim_decode_parses_like_json_loads(document: Path) -> None:
    raw = (FIXTURES / document).read_bytes()
    parse = PARSERS[document.stem]
    assert parse(decode_slurm_json(raw)) == parse(json.loads(raw))


def test_every_fixture_document_is_compared() -> None:
    assert {p.parts[0] for p in FIXTURE_DOCUMENTS} >= {*NEW_VERSIONS, RECORDED_2411}
    assert len(FIXTURE_DOCUMENTS) >= 8


# ---------------------------------------------------------------------------------------------
# bad input: one bad record is a warning, a wrong document is one SlurmJsonError


@pytest.mark.parametrize(
    "doc", [[], "jobs", None, {}, {"nodes": []}, {"jobs": "not a list"}, {"jobs": {"a": 1}}]
)
def test_wrong_job_documents_raise_one_clear_error(doc: Any) -> None:
    with pytest.raises(SlurmJsonError, match=r"squeue|sacct"):
        parse_squeue(doc)
    with pytest.raises(SlurmJsonError):
        parse_sacct(doc)


@pytest.mark.parametrize("doc", [[], {}, {"jobs": []}, {"sinfo": "x"}])
def test_wrong_node_documents_raise(doc: Any) -> None:
    with pytest.raises(SlurmJsonError, match="sinfo"):
        parse_sinfo(doc)


@pytest.mark.parametrize("version", NEW_VERSIONS)
def test_corrupt_squeue_records_are_warnings(version: str) -> None:
    doc = load(version, "squeue.json")
    jobs = {j["job_id"]: j for j in doc["jobs"]}
    del jobs[102]["job_id"]  # unusable: skipped
    jobs[103]["tres_alloc_str"] = "cpu=4,gres/gpu:2080_ti=lots"  # GPU spec unreadable
    jobs[103]["gres_detail"] = 17  # and the fallback too
    jobs[104]["submit_time"] = "yesterday"  # one bad field: the rest still counts
    jobs[108]["job_state"] = {"weird": True}
    doc["jobs"].append("garbage")
    doc["jobs"].append({"job_id": {"set": True, "number": {"deep": 1}}})
    result = parse_squeue(doc)
    got = by_id(result)
    assert 102 not in got
    assert len(got) == len(SQUEUE_EXPECTED) - 1
    assert got[101].gpus_by_type == {"a40": 2}  # neighbours unaffected
    assert got[104].submit_time is None and got[104].gpus_by_type == {"a40": 4}
    assert got[108].state == "UNKNOWN"
    text = "\n".join(result.warnings)
    assert "job record #1 skipped: missing job_id" in text
    assert "job 103: tres_alloc_str: cannot read GPU count in 'gres/gpu:2080_ti=lots'" in text
    assert "job 104: ignoring submit_time 'yesterday'" in text
    assert "job 108: unreadable state" in text
    assert f"job record #{len(doc['jobs']) - 2} skipped: not an object" in text
    assert f"job record #{len(doc['jobs']) - 1} skipped: missing job_id" in text


def test_corrupt_node_records_are_warnings() -> None:
    doc = load("v0.0.40", "nodes.json")
    doc["nodes"][0]["gres"] = "gpu:a40:many"
    doc["nodes"][1]["name"] = None
    doc["nodes"].append(["not", "a", "node"])
    result = parse_sinfo(doc)
    nodes = by_name(result)
    assert sorted(nodes) == ["baymax", "clippy"]
    assert nodes["clippy"].gpus_total == {}
    assert nodes["clippy"].gpus_used == {"a40": 2}
    text = "\n".join(result.warnings)
    assert "node clippy: gres: cannot read GPU count" in text
    assert "node record #1 skipped: missing name" in text
    assert "node record #3 skipped: not an object" in text


def test_slurm_reported_errors_become_warnings() -> None:
    doc = {"jobs": [], "errors": [{"description": "Invalid user: zed", "error_number": 2}]}
    assert parse_squeue(doc).warnings == ["slurm error: Invalid user: zed"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


FIELD_NAMES = sorted(
    set(load("v0.0.42", "squeue.json")["jobs"][0]) | set(load("v0.0.42", "sacct.json")["jobs"][0])
)


@functools.cache
def recorded(version: str, name: str) -> dict[str, Any]:
    """A fixture parsed once, for tests that only ever change copies of its records."""
    return load(version, name)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(field_name=st.sampled_from(FIELD_NAMES), value=json_values)
def test_no_field_value_can_crash_the_parsers(field_name: str, value: Any) -> None:
    for version, name, parse in [
        ("v0.0.42", "squeue.json", parse_squeue),
        ("v0.0.40", "sacct.json", parse_sacct),
        ("v0.0.42", "sacct.json", parse_sacct),
    ]:
        doc = recorded(version, name)
        parse({**doc, "jobs": [{**job, field_name: value} for job in doc["jobs"]]})  # no raise
    nodes = recorded("v0.0.42", "nodes.json")["nodes"]
    odd = [{**nodes[0], "gres": value}, {**nodes[1], "state": value}, *nodes[2:]]
    parse_sinfo({**recorded("v0.0.42", "nodes.json"), "nodes": odd})


# ---------------------------------------------------------------------------------------------
# real 22.05 output recorded from the test cluster (tests/fixtures/slurm/v0.0.38, see its README)

V38 = FIXTURES / "v0.0.38"
needs_v38 = pytest.mark.skipif(
    not (V38 / "squeue.json").exists(), reason="22.05 fixtures not recorded yet"
)


def by_job_name(result: ParseResult[Job]) -> dict[str, Job]:
    return {job.name: job for job in result.records}


@needs_v38
def test_v38_squeue() -> None:
    result = parse_squeue(load("v0.0.38", "squeue.json"))
    assert result.warnings == []
    jobs = by_job_name(result)
    expected = {
        # name: (job_id, user, account, partition, state, reason, gpus_by_type)
        "timeout-demo": (104, "bob", "hoffman-lab", "debug", "TIMEOUT", "TimeLimit", {}),
        "train-a40": (108, "alice", "hoffman-lab", "hoffman-lab", "RUNNING", "", {"a40": 2}),
        # --gpus=1: tres_per_job "gres:gpu:1", the a40 type comes from tres_alloc_str
        "eval-gpus1": (109, "bob", "hoffman-lab", "hoffman-lab", "RUNNING", "", {"a40": 1}),
        "train-rtx": (110, "carol", "kira-lab", "kira-lab", "RUNNING", "", {"rtx_6000": 3}),
        # preempted by urgent-2080 and requeued: pending again, asks for 4 untyped GPUs
        "overcap-sweep": (111, "dave", "overcap", "overcap", "PENDING", "BeginTime", {"": 4}),
        "urgent-2080": (112, "dave", "kira-lab", "kira-lab", "RUNNING", "", {"2080_ti": 1}),
        "waits-for-cap": (113, "carol", "kira-lab", "kira-lab", "PENDING", "AssocGrpGRES", {"": 1}),
        "overcap-array": (114, "alice", "overcap", "overcap", "PENDING", "Resources", {"": 4}),
    }
    for name, (job_id, user, account, partition, state, reason, gpus) in expected.items():
        job = jobs[name]
        got = (
            job.job_id,
            job.user,
            job.account,
            job.partition,
            job.state,
            job.reason,
            job.gpus_by_type,
        )
        assert got == (job_id, user, account, partition, state, reason, gpus), name
    assert jobs["overcap-sweep"].restarts == 1
    assert jobs["overcap-sweep"].nodes == ""
    assert jobs["train-a40"].nodes == "clippy"
    assert jobs["train-a40"].time_limit_minutes == 120
    assert jobs["eval-gpus1"].time_limit_minutes is None  # partition without MaxTime
    assert jobs["train-a40"].work_dir == "/home/alice"
    assert jobs["train-a40"].std_out == ""  # 22.05 squeue leaves standard_output empty
    assert (jobs["overcap-array"].array_job_id, jobs["overcap-array"].array_task) == (114, "0-9")
    assert jobs["train-a40"].array_job_id is None
    # raw wait status 15: killed by SIGTERM at the time limit
    timeout = jobs["timeout-demo"]
    # sacct -X shows 0:0 for a timed-out job; squeue's 15 is the batch step's SIGTERM.
    assert (timeout.exit_code, timeout.exit_signal) == (0, None)
    assert timeout.time_limit_minutes == 1
    assert timeout.end_time == timeout.start_time + 60
    assert jobs["train-a40"].exit_code is None  # running: no exit code yet


@needs_v38
def test_v38_sacct() -> None:
    result = parse_sacct(load("v0.0.38", "sacct.json"))
    assert result.warnings == []
    jobs = by_job_name(result)
    expected = {
        # name: (job_id, user, account, state, gpus_by_type, exit_code)
        "timeout-demo": (104, "bob", "hoffman-lab", "TIMEOUT", {}, 0),  # sacct -X: 0:0
        "quick-check": (105, "dave", "kira-lab", "COMPLETED", {}, 0),
        # `exit 3`: 22.05 sacct says SUCCESS/0, which proves nothing for a FAILED job
        "bad-config": (106, "carol", "kira-lab", "FAILED", {}, None),
        "cancel-me": (107, "bob", "hoffman-lab", "CANCELLED", {}, 0),  # sacct -X: 0:0
        "train-a40": (108, "alice", "hoffman-lab", "RUNNING", {"a40": 2}, None),
        "eval-gpus1": (109, "bob", "hoffman-lab", "RUNNING", {"a40": 1}, None),
        "train-rtx": (110, "carol", "kira-lab", "RUNNING", {"rtx_6000": 3}, None),
        # sacct still shows the preempted run (what it was allocated); squeue has it pending
        "overcap-sweep": (111, "dave", "overcap", "PREEMPTED", {"2080_ti": 4}, 0),
        "urgent-2080": (112, "dave", "kira-lab", "RUNNING", {"2080_ti": 1}, None),
        "waits-for-cap": (113, "carol", "kira-lab", "PENDING", {"": 1}, None),
        "overcap-array": (114, "alice", "overcap", "PENDING", {"": 4}, None),
    }
    for name, (job_id, user, account, state, gpus, exit_code) in expected.items():
        job = jobs[name]
        got = (job.job_id, job.user, job.account, job.state, job.gpus_by_type, job.exit_code)
        assert got == (job_id, user, account, state, gpus, exit_code), name
    assert jobs["waits-for-cap"].reason == "AssocGrpGRES"
    assert jobs["waits-for-cap"].nodes == ""  # "None assigned"
    assert jobs["overcap-sweep"].restarts == 0  # 22.05 sacct has no restart count
    # the pending array's tasks come as a hex bitmap, "0x3FF"
    assert (jobs["overcap-array"].array_job_id, jobs["overcap-array"].array_task) == (114, "0-9")
    assert jobs["timeout-demo"].time_limit_minutes == 1
    assert jobs["train-rtx"].time_limit_minutes is None
    assert jobs["bad-config"].work_dir == "/home/carol"
    assert jobs["quick-check"].end_time == jobs["quick-check"].start_time
    assert all(job.exit_signal is None for job in jobs.values())  # signals only on steps


@needs_v38
def test_v38_sinfo() -> None:
    result = parse_sinfo(load("v0.0.38", "sinfo.json"))
    assert result.warnings == []
    nodes = by_name(result)
    every_partition = ("hoffman-lab", "kira-lab", "debug", "overcap")
    assert {
        name: (n.state, n.gpus_total, n.gpus_used, n.cpus, n.cpus_allocated)
        for name, n in nodes.items()
    } == {
        "baymax": ("MIXED", {"2080_ti": 4}, {"2080_ti": 1}, 32, 1),
        "clippy": ("MIXED", {"a40": 4}, {"a40": 3}, 32, 2),
        "xaea-12": ("MIXED", {"rtx_6000": 4}, {"rtx_6000": 3}, 32, 4),
    }
    assert all(n.partitions == every_partition for n in nodes.values())
    assert nodes["clippy"].gpus_idle == {"a40": 1}


@needs_v38
def test_v38_squeue_gpus_match_sinfo_usage() -> None:
    """The GPUs squeue says running jobs hold add up to what sinfo says is in use."""
    jobs = parse_squeue(load("v0.0.38", "squeue.json")).records
    used: dict[str, int] = {}
    for job in jobs:
        if job.state == "RUNNING":
            for gpu_type, count in job.gpus_by_type.items():
                used[gpu_type] = used.get(gpu_type, 0) + count
    in_use: dict[str, int] = {}
    for node in parse_sinfo(load("v0.0.38", "sinfo.json")).records:
        for gpu_type, count in node.gpus_used.items():
            in_use[gpu_type] = in_use.get(gpu_type, 0) + count
    assert used == in_use == {"a40": 3, "rtx_6000": 3, "2080_ti": 1}
