"""One odd record never costs the rest of the poll (issue 13, item 1).

Each case is a real document (the 22.05 recordings) with one record spoiled the way a user or
a Slurm quirk could spoil it, decoded and parsed exactly as the poller does, then stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.slurm_decode import SlurmDecodeError, decode_slurm_json
from core.slurm_json import parse_sacct, parse_sinfo, parse_squeue
from store.db import open_db
from store.snapshots import load_snapshot
from tests.support.factories import CLUSTER
from tests.support.slurm_polls import save_slurm_poll

V38 = Path(__file__).parent / "fixtures" / "slurm" / "v0.0.38"


def _text(name: str) -> str:
    return (V38 / name).read_text()


def _doc(name: str) -> dict[str, Any]:
    return json.loads(_text(name))


def _squeue_bytes(spoil: Any) -> bytes:
    doc = _doc("squeue.json")
    spoil(doc["jobs"])
    return json.dumps(doc, ensure_ascii=False).encode()


ALL_IDS = sorted(j["job_id"] for j in _doc("squeue.json")["jobs"])


def test_a_job_name_that_is_not_utf8_is_replaced_and_named() -> None:
    doc = _doc("squeue.json")
    victim = doc["jobs"][0]
    victim["name"] = "bad@@name"
    raw = json.dumps(doc).encode().replace(b"bad@@name", b"bad\xffname")
    with pytest.raises(UnicodeDecodeError):
        raw.decode()  # really invalid
    result = parse_squeue(decode_slurm_json(raw))
    jobs = {j.job_id: j for j in result.records}
    assert sorted(jobs) == ALL_IDS
    assert jobs[victim["job_id"]].name == "bad\ufffdname"
    assert any(f"job {victim['job_id']}" in w and "UTF-8" in w for w in result.warnings)


@pytest.mark.parametrize("stray", [7, "job", None, [1, 2], True, 1.5])
def test_a_record_that_is_not_an_object_is_skipped_with_a_warning(stray: Any) -> None:
    raw = _squeue_bytes(lambda jobs: jobs.insert(1, stray))
    result = parse_squeue(decode_slurm_json(raw))
    assert sorted(j.job_id for j in result.records) == ALL_IDS
    assert any("job record #1 skipped: not an object" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", {"nested": 1}),
        ("time_limit", "forever"),
        ("job_state", 12),
        ("tres_alloc_str", ["gres/gpu=2"]),
        ("tres_per_node", "gres:gpu:a40:99999999999999999999"),
        ("restart_cnt", 2**70),
        ("submit_time", -5),
        ("exit_code", 2**80),
    ],
)
def test_a_field_of_the_wrong_type_or_range_costs_only_that_field(field: str, value: Any) -> None:
    def spoil(jobs: list[dict[str, Any]]) -> None:
        jobs[0][field] = value

    result = parse_squeue(decode_slurm_json(_squeue_bytes(spoil)))
    assert sorted(j.job_id for j in result.records) == ALL_IDS
    db = open_db(":memory:")
    save_slurm_poll(db, result.records, [], [], at=1.0)  # every number fits SQLite
    assert len(load_snapshot(db, CLUSTER).jobs) == len(ALL_IDS)


def test_the_same_job_twice_keeps_one_chosen_by_its_content_not_its_order() -> None:
    doc = _doc("squeue.json")
    first = doc["jobs"][0]
    rerun = {**first, "restart_cnt": 1, "job_state": "PENDING", "submit_time": 2_000_000_000}
    chosen = []
    for jobs in ([first, rerun, *doc["jobs"][1:]], [rerun, *doc["jobs"]]):
        result = parse_squeue(decode_slurm_json(json.dumps({**doc, "jobs": jobs})))
        assert sorted(j.job_id for j in result.records) == ALL_IDS
        assert any("listed 2 times" in w for w in result.warnings)
        chosen.append(next(j for j in result.records if j.job_id == first["job_id"]))
        db = open_db(":memory:")
        save_slurm_poll(db, result.records, [], [], at=1.0)  # no UNIQUE constraint failure
    assert [(j.restarts, j.state) for j in chosen] == [(1, "PENDING")] * 2


def test_odd_records_in_sacct_and_sinfo_are_isolated_too() -> None:
    sacct = _doc("sacct.json")
    sacct["jobs"].insert(0, "garbage")
    sacct["jobs"][1]["time"] = "yesterday"
    parsed = parse_sacct(decode_slurm_json(json.dumps(sacct).encode()))
    assert len(parsed.records) == len(sacct["jobs"]) - 1
    sinfo = _doc("sinfo.json")
    sinfo["nodes"].append(["not", "a", "node"])
    sinfo["nodes"][0]["gres"] = "gpu:a40:" + "9" * 30
    nodes = parse_sinfo(decode_slurm_json(json.dumps(sinfo).encode()))
    assert len(nodes.records) == len(sinfo["nodes"]) - 1
    assert nodes.records[0].gpus_total == {}
    assert any("out of range" in w for w in nodes.warnings)


def test_record_lists_of_the_wrong_kind_are_one_clear_error() -> None:
    from core.slurm_json import SlurmJsonError

    with pytest.raises(SlurmJsonError, match="'jobs' should be a list"):
        parse_squeue(decode_slurm_json(b'{"jobs": {"1": {}}}'))
    with pytest.raises(SlurmDecodeError):
        decode_slurm_json(b"squeue: error: Invalid user")
    with pytest.raises(SlurmDecodeError):
        decode_slurm_json(b"[1, 2]")


def test_nothing_found_is_an_answer_in_either_generation_other_messages_are_kept() -> None:
    # 22.05's sacct says "no jobs" as error 9003; 24.11's squeue and sacct as this warning.
    quiet = {
        "jobs": [],
        "errors": [{"error_number": 9003, "error": "Nothing found"}],
        "warnings": [{"description": "Zero jobs to dump", "source": "dump_jobs"}],
    }
    assert parse_squeue(quiet).warnings == []
    assert parse_sacct(quiet).warnings == []
    loud = {"jobs": [], "warnings": [{"description": "Partition lookup failed", "source": "x"}]}
    assert parse_squeue(loud).warnings == ["slurm warning: Partition lookup failed"]
