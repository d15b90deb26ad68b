"""Helpers for tests that drive a real Slurm test cluster: deploy/testcluster.sh (22.05), or
the cluster script named by $SKYBOT_TESTCLUSTER (deploy/testcluster-24.11.sh sets it when it
runs the cluster lane inside its sandbox)."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, cast

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]


def cluster_script(verb: str, timeout: float = 180) -> None:
    """Run a verb (`up`, `stop-controller`) of the script that manages the cluster under test."""
    script = os.environ.get("SKYBOT_TESTCLUSTER") or str(REPO / "deploy" / "testcluster.sh")
    result = subprocess.run([script, verb], capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{script} {verb} failed: {result.stderr.strip()[-2000:]}")


def _base_state(state: Any) -> Any:
    """A job state as 22.05 writes it: Slurm 23.02+ lists the base state first, then flags."""
    return state[0] if isinstance(state, list) and state else state


LAB_USERS = {"hoffman-lab": ("alice", "bob"), "kira-lab": ("carol", "dave")}
TEST_USERS = ("alice", "bob", "carol", "dave", "skybot")


def slurm_answers() -> bool:
    try:
        return subprocess.run(["sinfo", "-h"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def as_user(user: str, *command: str, timeout: float = 30) -> str:
    """Run a command as a test user (not root), returning stdout; raise on failure."""
    result = subprocess.run(
        ["runuser", "-u", user, "--", *command],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd="/tmp",
    )
    if result.returncode != 0:
        raise RuntimeError(f"{command} as {user} failed: {result.stderr.strip()}")
    return result.stdout


def sbatch(user: str, *args: str) -> int:
    """Submit as `user`; returns the job id."""
    out = as_user(user, "sbatch", "--parsable", *args)
    return int(out.strip().split(";")[0])


def scancel_everything() -> None:
    # scancel takes one user per call: "-u alice,bob" quietly cancels nothing.
    for user in TEST_USERS:
        subprocess.run(["scancel", "-u", user], capture_output=True, timeout=30, check=True)
    wait_until(lambda: not squeue_json()["jobs"], timeout=60, what="the queue to drain")


def squeue_json(active_only: bool = True) -> dict[str, Any]:
    """squeue's JSON, `job_state` a string in every version; by default without the finished
    jobs it keeps listing for MinJobAge."""
    out = subprocess.run(
        ["squeue", "--all", "--json"], capture_output=True, timeout=30, check=True
    ).stdout.decode(errors="replace")  # a job name may be any bytes its owner chose
    data = json.loads(out)
    for job in data["jobs"]:
        job["job_state"] = _base_state(job.get("job_state"))
    if active_only:
        data["jobs"] = [j for j in data["jobs"] if j.get("job_state") in _ACTIVE]
    return data


def squeue_state(job_id: int) -> str | None:
    """The job's state as squeue lists it, or None once squeue no longer lists it."""
    jobs = [j for j in squeue_json(active_only=False)["jobs"] if j["job_id"] == job_id]
    return jobs[0]["job_state"] if jobs else None


def sacct_json(job_id: int) -> dict[str, Any]:
    """sacct's JSON for one job, `state.current` a string in every version."""
    out = subprocess.run(
        ["sacct", "--json", "-j", str(job_id)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    data = json.loads(out)
    for job in data["jobs"]:
        job["state"]["current"] = _base_state(job["state"]["current"])
    return data


def job_state(job_id: int) -> str:
    out = subprocess.run(
        ["scontrol", "show", "job", str(job_id)], capture_output=True, timeout=30
    ).stdout.decode(errors="replace")
    for word in out.split():
        if word.startswith("JobState="):
            return word.removeprefix("JobState=")
    return "UNKNOWN"


def wait_until(
    check: Callable[[], T | None], timeout: float, what: str, interval: float = 0.5
) -> T:
    """For sync tests; an async test uses `wait_for`."""
    __tracebackhide__ = True  # a timeout points at the test's line, not here
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


async def wait_for(
    check: Callable[[], T | None] | Callable[[], Awaitable[T | None]],
    timeout: float,
    what: str,
    interval: float = 0.5,
    *,
    in_thread: bool = True,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """`wait_until` for async tests: `check` every `interval` s until it returns something true,
    which is returned; after `timeout` s an AssertionError names `what` was awaited.

    A blocking check (squeue, a file, sqlite) runs in a worker thread and the pause is
    asyncio's, so the bot or Slack stand-in on the test's event loop keeps serving while the
    test waits; time.sleep or a subprocess.run here would freeze them. A check that awaits (a
    poll, the store writer) or reads the loop's own objects (the stand-in's calls, a sender's
    passes) belongs on the loop: a coroutine function runs there, a plain one with
    `in_thread=False`; an awaitable a check returns is awaited there.

    `timeout` is on `clock`: a test on looptime's fake loop time that asserts something
    happens within so many seconds of that time passes `asyncio.get_running_loop().time`."""
    __tracebackhide__ = True  # a timeout points at the test's line, not here
    deadline = clock() + timeout
    while True:
        on_loop = not in_thread or inspect.iscoroutinefunction(check)
        result = check() if on_loop else await asyncio.to_thread(check)
        if inspect.isawaitable(result):
            result = await result
        if result:
            return cast(T, result)
        if clock() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(interval)


async def sbatch_async(user: str, *args: str) -> int:
    """`sbatch` for async tests: submitted from a worker thread, the event loop runs on."""
    return await asyncio.to_thread(sbatch, user, *args)


async def scancel_async(*args: str) -> None:
    """`scancel ARGS` for async tests, from a worker thread."""
    await asyncio.to_thread(
        subprocess.run, ["scancel", *args], capture_output=True, timeout=30, check=True
    )


def reach_time_limit(job_id: int) -> None:
    """End a running job at its time limit now instead of a minute on: Slurm's limits count
    in whole minutes. Root cuts the limit to zero and slurmctld's own time-limit check ends
    the job TIMEOUT, as at any limit (within its 30 s check on 24.11, seconds on 22.05)."""
    subprocess.run(
        ["scontrol", "update", f"JobId={job_id}", "TimeLimit=0"],
        capture_output=True,
        timeout=30,
        check=True,
    )


_ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED"}
