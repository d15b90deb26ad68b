"""Helpers for tests that drive the real Slurm test cluster (deploy/testcluster.sh)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

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
    """squeue's JSON; by default without the finished jobs it keeps listing for MinJobAge."""
    out = subprocess.run(
        ["squeue", "--all", "--json"], capture_output=True, timeout=30, check=True
    ).stdout.decode(errors="replace")  # a job name may be any bytes its owner chose
    data = json.loads(out)
    if active_only:
        data["jobs"] = [j for j in data["jobs"] if j.get("job_state") in _ACTIVE]
    return data


def squeue_state(job_id: int) -> str | None:
    """The job's state as squeue lists it, or None once squeue no longer lists it."""
    jobs = [j for j in squeue_json(active_only=False)["jobs"] if j["job_id"] == job_id]
    return jobs[0]["job_state"] if jobs else None


def sacct_json(job_id: int) -> dict[str, Any]:
    out = subprocess.run(
        ["sacct", "--json", "-j", str(job_id)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    return json.loads(out)


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
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


_ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED"}
