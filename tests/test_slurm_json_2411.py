"""core.slurm_json against real Slurm 24.11 output (data_parser v0.0.42), recorded from the
24.11 test cluster by tests/fixtures/slurm/v0.0.42/record.sh (see its README for the jobs).

Jobs are looked up by name, not id: a re-recording gets new job ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.records import Job
from core.slurm_decode import decode_slurm_json
from core.slurm_json import ParseResult, parse_sacct, parse_sinfo, parse_squeue

V42 = Path(__file__).parent / "fixtures" / "slurm" / "v0.0.42"


def load(name: str) -> dict[str, Any]:
    return json.loads((V42 / name).read_text())


def by_job_name(result: ParseResult[Job]) -> dict[str, Job]:
    """Jobs by name; an array's records as NAME[TASKS] (its pending rest) and NAME_TASK."""
    jobs: dict[str, Job] = {}
    for job in result.records:
        if job.array_task is None:
            jobs[job.name] = job
        elif job.array_task.isdigit():
            jobs[f"{job.name}_{job.array_task}"] = job
        else:
            jobs[f"{job.name}[{job.array_task}]"] = job
    return jobs


def test_recordings_are_24_11_output() -> None:
    for name in ("squeue.json", "sacct.json", "sinfo.json", "nodes.json", "sacctmgr_assoc.json"):
        meta = load(name)["meta"]
        assert meta["slurm"]["release"].startswith("24.11."), name
        assert meta["plugin"]["data_parser"] == "data_parser/v0.0.42", name


def test_squeue() -> None:
    result = parse_squeue(load("squeue.json"))
    assert result.warnings == []
    jobs = by_job_name(result)
    # name: (user, account, partition, state, reason, gpus_by_type, nodes)
    expected = {
        "train-a40": ("alice", "hoffman-lab", "hoffman-lab", "RUNNING", "", {"a40": 2}, "clippy"),
        # --gpus=1: tres_per_job "gres/gpu:1"; the a40 type comes from the allocation
        "eval-gpus1": ("bob", "hoffman-lab", "hoffman-lab", "RUNNING", "", {"a40": 1}, "clippy"),
        "train-rtx": ("carol", "kira-lab", "kira-lab", "RUNNING", "", {"rtx_6000": 3}, "xaea-12"),
        # preempted by urgent-2080, requeued: pending, waiting out BeginTime, 4 untyped GPUs
        "overcap-sweep": ("dave", "overcap", "overcap", "PENDING", "BeginTime", {"": 4}, ""),
        "urgent-2080": ("dave", "kira-lab", "kira-lab", "RUNNING", "", {"2080_ti": 1}, "baymax"),
        "waits-for-cap": ("carol", "kira-lab", "kira-lab", "PENDING", "AssocGrpGRES", {"": 1}, ""),
        "capped-array_0": (
            "alice", "hoffman-lab", "hoffman-lab", "RUNNING", "", {"a40": 1}, "clippy",
        ),
        "capped-array[1-3]": (
            "alice", "hoffman-lab", "hoffman-lab", "PENDING", "AssocGrpGRES", {"a40": 1}, "",
        ),
        "throttled-array_0": ("bob", "hoffman-lab", "debug", "RUNNING", "", {}, "xaea-12"),
        "throttled-array_1": ("bob", "hoffman-lab", "debug", "RUNNING", "", {}, "xaea-12"),
        "throttled-array[2-5%2]": (
            "bob", "hoffman-lab", "debug", "PENDING", "JobArrayTaskLimit", {}, "",
        ),
        "overcap-array[0-9]": ("alice", "overcap", "overcap", "PENDING", "Resources", {"": 4}, ""),
    }  # fmt: skip
    assert sorted(jobs) == sorted(expected)
    for name, want in expected.items():
        job = jobs[name]
        got = (
            job.user,
            job.account,
            job.partition,
            job.state,
            job.reason,
            job.gpus_by_type,
            job.nodes,
        )
        assert got == want, name
    assert jobs["overcap-sweep"].restarts == 1
    assert all(job.restarts == 0 for name, job in jobs.items() if name != "overcap-sweep")
    assert jobs["train-rtx"].comment == "skybot:5f3a9c01"
    assert jobs["train-a40"].time_limit_minutes == 120
    assert jobs["eval-gpus1"].time_limit_minutes is None  # a partition without MaxTime
    assert jobs["throttled-array_0"].time_limit_minutes == 240  # debug's MaxTime=4:00:00
    assert jobs["train-a40"].std_out == f"/home/alice/slurm-{jobs['train-a40'].job_id}.out"
    assert jobs["train-a40"].work_dir == "/home/alice"
    assert jobs["waits-for-cap"].start_time is None
    assert jobs["train-a40"].exit_code is None  # running: no exit code yet
    # The last task of an array keeps the array's id; the others get their own.
    rest = jobs["capped-array[1-3]"]
    assert (rest.array_job_id, rest.array_task) == (rest.job_id, "1-3")
    first = jobs["capped-array_0"]
    assert first.array_job_id == rest.job_id != first.job_id
    assert jobs["train-a40"].array_job_id is None


def test_squeue_gpus_match_node_usage() -> None:
    """The GPUs squeue says running jobs hold add up to what the nodes say is in use."""
    used: dict[str, int] = {}
    for job in parse_squeue(load("squeue.json")).records:
        if job.state == "RUNNING":
            for gpu_type, count in job.gpus_by_type.items():
                used[gpu_type] = used.get(gpu_type, 0) + count
    for name in ("nodes.json", "sinfo.json"):
        in_use: dict[str, int] = {}
        for node in parse_sinfo(load(name)).records:
            for gpu_type, count in node.gpus_used.items():
                in_use[gpu_type] = in_use.get(gpu_type, 0) + count
        assert used == in_use == {"a40": 4, "rtx_6000": 3, "2080_ti": 1}, name


def test_sacct() -> None:
    for name in ("sacct.json", "sacct_duplicates.json"):
        result = parse_sacct(load(name))
        assert result.warnings == []
        jobs = by_job_name(result)
        # name: (user, account, state, gpus_by_type)
        expected = {
            "timeout-demo": ("bob", "hoffman-lab", "TIMEOUT", {}),
            "quick-check": ("dave", "kira-lab", "COMPLETED", {}),
            "bad-config": ("carol", "kira-lab", "FAILED", {}),
            "killed": ("alice", "hoffman-lab", "FAILED", {}),
            "cancel-me": ("bob", "hoffman-lab", "CANCELLED", {}),
            "train-a40": ("alice", "hoffman-lab", "RUNNING", {"a40": 2}),
            "train-rtx": ("carol", "kira-lab", "RUNNING", {"rtx_6000": 3}),
            # the preempted run, what it was allocated; squeue has the job pending again
            "overcap-sweep": ("dave", "overcap", "PREEMPTED", {"2080_ti": 4}),
            "waits-for-cap": ("carol", "kira-lab", "PENDING", {"": 1}),
            "capped-array[1-3]": ("alice", "hoffman-lab", "PENDING", {"a40": 1}),
            "overcap-array[0-9]": ("alice", "overcap", "PENDING", {"": 4}),
        }
        for job_name, want in expected.items():
            job = jobs[job_name]
            assert (job.user, job.account, job.state, job.gpus_by_type) == want, (name, job_name)
        assert jobs["waits-for-cap"].nodes == ""
        assert jobs["timeout-demo"].time_limit_minutes == 1
        assert jobs["bad-config"].work_dir == "/home/carol"


def _sacct_exit_codes() -> dict[str, tuple[str, int, int]]:
    """sacct's own `-o jobid,jobname,state,exitcode` text: name -> (state, code, signal)."""
    codes = {}
    for line in (V42 / "sacct_exitcodes.txt").read_text().splitlines():
        _, name, state, exit_code = line.split("|")
        code, signal = exit_code.split(":")
        codes[name] = (state.split()[0], int(code), int(signal))
    return codes


def test_exit_codes_and_signals_are_what_sacct_says() -> None:
    """exit 3, SIGKILL, a time limit and scancel, each as `sacct -o ExitCode` shows it."""
    text = _sacct_exit_codes()
    assert {name: text[name] for name in ("bad-config", "killed", "timeout-demo", "cancel-me")} == {
        "bad-config": ("FAILED", 3, 0),
        "killed": ("FAILED", 0, 9),
        "timeout-demo": ("TIMEOUT", 0, 0),
        "cancel-me": ("CANCELLED", 0, 0),
    }
    jobs = by_job_name(parse_sacct(load("sacct.json")))
    for name in ("quick-check", "bad-config", "killed", "timeout-demo", "cancel-me"):
        job = jobs[name]
        state, code, signal = text[name]
        # Unset is as good as sacct's 0 (a job killed by a signal has no exit code of its own).
        assert (job.state, job.exit_code or 0, job.exit_signal or 0) == (state, code, signal), name


def test_nodes_from_scontrol_and_sinfo_agree() -> None:
    every_partition = ("hoffman-lab", "kira-lab", "debug", "overcap")
    expected = {
        "baymax": ("MIXED", {"2080_ti": 4}, {"2080_ti": 1}, 32, 1),
        "clippy": ("MIXED", {"a40": 4}, {"a40": 4}, 32, 3),
        "xaea-12": ("MIXED", {"rtx_6000": 4}, {"rtx_6000": 3}, 32, 6),
    }
    for name in ("nodes.json", "sinfo.json"):
        result = parse_sinfo(load(name))
        assert result.warnings == []
        nodes = {n.name: n for n in result.records}
        got = {
            n.name: (n.state, n.gpus_total, n.gpus_used, n.cpus, n.cpus_allocated)
            for n in nodes.values()
            if n.name in expected
        }
        assert got == expected, name
        # The 24.11 cluster's drained spare node (olaf), if a re-recording caught it.
        assert all(not nodes[n].schedulable for n in set(nodes) - set(expected)), name
        assert all(n.partitions == every_partition for n in nodes.values()), name
        assert nodes["clippy"].gpus_idle == {"a40": 0}
        assert nodes["baymax"].gpus_idle == {"2080_ti": 3}


def test_slim_decode_reads_the_recordings_like_json_loads() -> None:
    for name, parse in (
        ("squeue.json", parse_squeue),
        ("sacct.json", parse_sacct),
        ("sacct_duplicates.json", parse_sacct),
        ("sinfo.json", parse_sinfo),
        ("nodes.json", parse_sinfo),
    ):
        raw = (V42 / name).read_bytes()
        assert parse(decode_slurm_json(raw)) == parse(json.loads(raw)), name


def test_an_array_asking_for_each_tasks_mail_is_read_through_the_slim_decode() -> None:
    """24.11's squeue lists `"mail_type": ["END", "ARRAY_TASKS"]` on each task of an array
    submitted with `--mail-type=ARRAY_TASKS,END` (seen on the 24.11 test cluster). The slim
    decode dropped the field, so such an array got one end DM instead of one per task."""
    document = load("squeue.json")
    for job in document["jobs"]:
        if job["array_job_id"]["number"]:
            job["mail_type"] = ["END", "ARRAY_TASKS"]
    raw = json.dumps(document).encode()
    tasks = [job for job in parse_squeue(decode_slurm_json(raw)).records if job.array_job_id]
    assert tasks and all(job.mail_array_tasks for job in tasks)
    others = [job for job in parse_squeue(decode_slurm_json(raw)).records if not job.array_job_id]
    assert others and not any(job.mail_array_tasks for job in others)
