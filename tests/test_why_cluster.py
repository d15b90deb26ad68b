"""`/sky why` against the real cluster: every command it tells a user to type is run as that
user and Slurm must accept it; requeues by an admin and by preemption are told apart with
Slurm's own times; a job Slurm has forgotten is answered from skybot's history; a pending job
gets Slurm's own start estimate and its place at the lab's cap."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from core.config_schema import NotificationsConfig
from core.job_notices import REQUEUED_KIND, Seen, compose_job_notice, notice_kind
from core.notice_cluster import NoticeCluster
from core.notice_text import format_duration
from core.transitions import Transition
from handlers.commands.why_explain import NO_TIME_LIMIT_HORIZON
from tests.support.cluster import sbatch, squeue_json, wait_for
from tests.support.poller_harness import Harness, harness, running
from tests.support.why_answers import LAB, run_as, suggested, why

__all__ = ["harness"]  # a fixture, used by name

pytestmark = pytest.mark.cluster


def held_tasks(job_id: int) -> dict[str, str]:
    """Each task (or the job) of `job_id` that squeue lists, with its reason, one per line."""
    out = subprocess.run(
        ["squeue", "-h", "-r", "-j", str(job_id), "-o", "%i %r"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def reason_of(job_id: int) -> str | None:
    for job in squeue_json()["jobs"]:
        if job["job_id"] == job_id or job.get("array_job_id") == job_id:
            return str(job["state_reason"])
    return None


async def ask_and_run(harness: Harness, question: str, verb: str) -> str:
    """Ask, check the answer suggests exactly one `verb` command, run it as alice."""
    text = await why(harness, question)
    commands = [c for c in suggested(text) if c.startswith(verb)]
    assert len(commands) == 1, text
    result = await asyncio.to_thread(run_as, "alice", commands[0])
    assert result.returncode == 0, f"{commands[0]!r} refused by Slurm: {result.stderr}"
    return commands[0]


async def test_every_command_why_suggests_is_accepted_by_slurm(harness: Harness) -> None:
    plain = sbatch("alice", *LAB, "-H", "--wrap", "sleep 600")
    array = sbatch("alice", *LAB, "-H", "--array=0-20%2", "--wrap", "sleep 600")
    tasks = sbatch("alice", *LAB, "-H", "--array=1,3,5-9%1", "--wrap", "sleep 600")
    failing = sbatch("alice", *LAB, "--wrap", "false")
    after = f"--dependency=afterok:{failing}"
    dep_plain = sbatch("alice", *LAB, after, "--wrap", "sleep 600")
    dep_array = sbatch("alice", *LAB, after, "--array=0-5%2", "--wrap", "sleep 600")
    await wait_for(
        lambda: (
            reason_of(dep_array) == "DependencyNeverSatisfied"
            and reason_of(dep_plain) == "DependencyNeverSatisfied"
        ),
        60,
        "the dependent jobs to see their dependency fail",
    )

    await ask_and_run(harness, str(plain), "scontrol release")
    await wait_for(lambda: reason_of(plain) != "JobHeldUser", 60, "the plain job's release")
    # One task of a held array: that task only.
    assert await ask_and_run(harness, f"{tasks}_5", "scontrol release") == (
        f"scontrol release {tasks}_5"
    )
    await wait_for(
        lambda: held_tasks(tasks).get(f"{tasks}_5") not in (None, "JobHeldUser"), 60, "5"
    )
    assert held_tasks(tasks)[f"{tasks}_7"] == "JobHeldUser"
    # The whole held array, as squeue lists it: `{array}_0-20%2` is what Slurm refuses.
    await ask_and_run(harness, str(array), "scontrol release")
    await wait_for(
        lambda: held_tasks(array) and "JobHeldUser" not in held_tasks(array).values(),
        60,
        "every task of the array to be released",
    )
    await ask_and_run(harness, f"{dep_array}_3", "scancel")
    await wait_for(
        lambda: f"{dep_array}_3" not in held_tasks(dep_array), 60, "task 3 to be cancelled"
    )
    assert f"{dep_array}_4" in held_tasks(dep_array)
    await ask_and_run(harness, str(dep_array), "scancel")
    await ask_and_run(harness, str(dep_plain), "scancel")
    await wait_for(
        lambda: not held_tasks(dep_array) and not held_tasks(dep_plain), 60, "the cancels to land"
    )


async def test_the_overcap_options_why_suggests_are_accepted_by_sbatch(harness: Harness) -> None:
    # hoffman-lab's 4 GPUs on xaea-12; clippy's a40s stay idle for overcap.
    sbatch("alice", *LAB, "--gpus-per-node=rtx_6000:4", "--wrap", "sleep 600")
    waiting = sbatch("alice", *LAB, "--gpus-per-node=a40:2", "--wrap", "sleep 600")
    await wait_for(lambda: reason_of(waiting) == "AssocGrpGRES", 60, "the job to wait at the cap")
    text = await why(harness, str(waiting))
    flags = re.search(r"Resubmit with `([^`]+)`", text)
    assert flags is not None, text
    test_only = f"sbatch --test-only {flags[1]} --gpus-per-node=a40:2 --wrap true"
    result = await asyncio.to_thread(run_as, "alice", test_only)
    assert result.returncode == 0, result.stderr


def sacct_runs(job_id: int) -> list[dict[str, Any]]:
    out = subprocess.run(
        ["sacct", "--json", "--duplicates", "-j", str(job_id)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    return list(json.loads(out)["jobs"])


def stopped_run_seconds(job_id: int, states: tuple[str, ...]) -> int:
    """The stopped run's length by sacct: end - start of the run in one of `states`."""
    for run in sacct_runs(job_id):
        state = run["state"]["current"]
        words = state if isinstance(state, list) else [state]
        if any(w in states for w in words):
            return int(_number(run["time"]["end"]) - _number(run["time"]["start"]))
    raise AssertionError(f"sacct lists no {states} run of job {job_id}")


def _number(value: Any) -> int:
    return int(value["number"] if isinstance(value, dict) else value)


async def requeue_record(harness: Harness, job_id: int) -> Any:
    async def recorded() -> Any:
        await harness.poll()
        found = [j for i, s, _, j in await harness.transitions() if i == job_id and s == "REQUEUED"]
        return found[-1] if found else None

    return await wait_for(recorded, 60, f"a requeue of job {job_id} recorded")


async def test_an_admins_requeue_is_not_called_a_preemption(harness: Harness) -> None:
    job_id = sbatch("alice", *LAB, "--gpus-per-node=a40:1", "--wrap", "sleep 600")
    await running(harness, job_id)
    await asyncio.sleep(3)  # a run of a few seconds, so its length is not 0 by chance
    subprocess.run(["scontrol", "requeue", str(job_id)], check=True, timeout=30)
    record = await requeue_record(harness, job_id)
    transition = Transition(record, "RUNNING", "REQUEUED", record.restarts)
    assert notice_kind(transition, {"overcap"}) == REQUEUED_KIND
    notice = compose_job_notice(
        transition,
        REQUEUED_KIND,
        Seen(time.time() + 30),
        NotificationsConfig(),
        NoticeCluster("skynet"),
    )
    lost = stopped_run_seconds(job_id, ("REQUEUED",))
    assert lost >= 3
    assert f"Runtime lost: {format_duration(lost)}," in notice.text
    assert "requeued with `scontrol requeue`" in notice.text and "preempt" not in notice.text
    text = await why(harness, str(job_id))
    assert "It has been requeued 1 time; the last run was requeued with `scontrol requeue`" in text
    assert f"after running {format_duration(lost)}." in text
    assert "preempted" not in text


async def test_a_preemption_is_told_as_one_with_slurms_times(harness: Harness) -> None:
    overcap = sbatch("dave", "-p", "overcap", "-A", "overcap", "-w", "baymax", "-o", "/dev/null",
                     "--chdir=/tmp", "--gpus-per-node=4", "--wrap", "sleep 600")  # fmt: skip
    await running(harness, overcap)
    await asyncio.sleep(2)
    sbatch("carol", "-p", "kira-lab", "-A", "kira-lab", "-w", "baymax", "-o", "/dev/null",
           "--chdir=/tmp", "--gpus-per-node=2080_ti:2", "--wrap", "sleep 600")  # fmt: skip
    record = await requeue_record(harness, overcap)
    assert record.earlier_run is not None and record.earlier_run.state == "PREEMPTED"
    transition = Transition(record, "RUNNING", "REQUEUED", record.restarts)
    assert notice_kind(transition, {"overcap"}) == "PREEMPTED"
    notice = compose_job_notice(
        transition,
        "PREEMPTED",
        Seen(time.time() + 30),
        NotificationsConfig(),
        NoticeCluster("skynet"),
    )
    lost = stopped_run_seconds(overcap, ("PREEMPTED",))
    assert f"Runtime lost: {format_duration(lost)}," in notice.text
    text = await why(harness, str(overcap), user="dave")
    assert "the last run was preempted: a job with priority needed its GPUs" in text


async def test_why_answers_for_a_job_slurm_no_longer_lists(harness: Harness) -> None:
    job_id = sbatch("alice", "-A", "hoffman-lab", "-p", "hoffman-lab", "--chdir=/tmp",
                    "-o", "/tmp/why-ended-%j.out", "--wrap", "sleep 2; exit 3")  # fmt: skip

    async def ended() -> bool:
        view = await harness.poll()
        recorded = [s for i, s, _, _ in await harness.transitions() if i == job_id]
        return "FAILED" in recorded and job_id not in view.jobs_by_id

    await wait_for(ended, 120, "the job's end recorded and squeue no longer listing it")
    text = await why(harness, str(job_id))
    assert f"Job `{job_id}` (`wrap`, `alice`) has ended: it failed " in text
    assert "(`FAILED`, exit code 3)." in text
    assert f"Its output: `/tmp/why-ended-{job_id}.out`" in text
    assert "Slurm itself no longer lists the job" in text
    Path(f"/tmp/why-ended-{job_id}.out").unlink(missing_ok=True)


def squeue_start(job_id: int) -> int:
    for job in squeue_json()["jobs"]:
        if job["job_id"] == job_id:
            return _number(job["start_time"])
    return 0


async def test_why_gives_slurms_start_estimate_and_the_place_at_the_cap(
    harness: Harness,
) -> None:
    # carol holds clippy's four a40s for at most 10 min; alice's a40:4 waits for them, and
    # backfill plans its start at the end of carol's time limit.
    kira = ("-p", "kira-lab", "-A", "kira-lab", "-w", "clippy", "--chdir=/tmp", "-o", "/dev/null")
    # Each holder runs before the jobs behind it queue: under fair-share theirs may outrank it.
    holder = sbatch("carol", *kira, "--time=10", "--gpus-per-node=a40:4", "--wrap", "sleep 600")
    await running(harness, holder)
    behind = sbatch("alice", *LAB, "--time=5", "--gpus-per-node=a40:4", "--wrap", "sleep 60")
    await wait_for(lambda: squeue_start(behind) > time.time() + 60, 60, "a backfill estimate")
    text = await why(harness, str(behind))
    start = squeue_start(behind)
    said = re.search(r"Slurm's estimate: it starts at [^,]+, in about (\d+) min", text)
    assert said is not None, text
    assert abs(int(said[1]) * 60 - (start - time.time())) < 90, (text, start)

    # bob fills hoffman-lab's cap: two more of alice's jobs wait on it.
    await running(harness, sbatch("bob", *LAB, "--gpus-per-node=rtx_6000:4", "--wrap", "sleep 600"))
    first = sbatch("alice", *LAB, "--gpus-per-node=2080_ti:1", "--wrap", "sleep 60")
    second = sbatch("alice", *LAB, "--gpus-per-node=2080_ti:1", "--wrap", "sleep 60")
    await wait_for(lambda: reason_of(second) == "AssocGrpGRES", 60, "the jobs to wait at the cap")
    await wait_for(lambda: reason_of(first) == "AssocGrpGRES", 60, "the jobs to wait at the cap")
    text = await why(harness, str(second))
    place = re.search(r"It is number (\d+) of the (\d+) jobs waiting at `hoffman-lab`'s cap", text)
    assert place is not None, text
    assert int(place[1]) > 1 and int(place[1]) == int(place[2])  # submitted last
    estimate = squeue_start(second)
    # bob's job has no time limit (the partition has none): Slurm may plan its end a year out.
    if estimate > time.time() + NO_TIME_LIMIT_HORIZON:
        assert "Slurm has no real estimate: a job it waits for has no time limit" in text
    elif estimate > time.time():
        assert "Slurm's estimate: it starts at " in text
    else:
        assert "Slurm does not estimate a start for it." in text


async def test_a_start_slurm_plans_a_year_out_is_not_passed_on_as_an_estimate(
    harness: Harness,
) -> None:
    # dave's job has no time limit (kira-lab has none): Slurm plans its end, and so the
    # start of carol's job behind it, a year from now.
    kira = ("-p", "kira-lab", "-A", "kira-lab", "-w", "clippy", "--chdir=/tmp", "-o", "/dev/null")
    await running(harness, sbatch("dave", *kira, "--gpus-per-node=a40:4", "--wrap", "sleep 600"))
    behind = sbatch("carol", *kira, "--gpus-per-node=a40:4", "--wrap", "sleep 60")
    await wait_for(
        lambda: squeue_start(behind) > time.time() + NO_TIME_LIMIT_HORIZON,
        90,
        "Slurm's start a year out",
    )
    text = await why(harness, str(behind))
    assert "Slurm has no real estimate: a job it waits for has no time limit" in text, text
    assert "Slurm's estimate" not in text, text


async def test_a_node_failure_requeue_is_told_as_one(harness: Harness) -> None:
    job_id = sbatch("alice", *LAB, "-w", "baymax", "--requeue", "--gpus-per-node=2080_ti:1",
                    "--wrap", "sleep 600")  # fmt: skip
    await running(harness, job_id)
    await asyncio.sleep(2)
    node = ["scontrol", "update", "NodeName=baymax"]
    try:
        subprocess.run([*node, "State=DOWN", "Reason=why-node-failure-test"], check=True)
        record = await requeue_record(harness, job_id)
    finally:
        # The test cluster's node registers again at once (ReturnToService); a real one
        # would stay down. Resuming an idle node fails, harmlessly.
        subprocess.run([*node, "State=RESUME"], capture_output=True, check=False)
    assert record.earlier_run is not None and record.earlier_run.state == "NODE_FAIL"
    transition = Transition(record, "RUNNING", "REQUEUED", record.restarts)
    assert notice_kind(transition, {"overcap"}) == REQUEUED_KIND
    notice = compose_job_notice(
        transition,
        REQUEUED_KIND,
        Seen(time.time() + 30),
        NotificationsConfig(),
        NoticeCluster("skynet"),
    )
    assert "was requeued after its node failed (restart 1)" in notice.text
    lost = stopped_run_seconds(job_id, ("NODE_FAIL",))
    assert f"Runtime lost: {format_duration(lost)}," in notice.text
    text = await why(harness, str(job_id))
    assert "the last run was stopped because its node failed" in text
