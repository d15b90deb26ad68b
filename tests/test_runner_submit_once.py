"""The runner's submission records (issue 27, item 3): a tag is submitted once, whoever asks.

The installed runner through real sudo as the skybot user, as alice, on the real cluster.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.runner_client import call_runner
from core.runner_contract import submit_request, submit_status_request

pytestmark = pytest.mark.cluster

AS_SKYBOT = ["/usr/sbin/runuser", "-u", "skybot", "--"]
HOFFMAN = Path("/srv/hoffman-lab/flash9")
RECORDS = Path("/home/alice/.local/state/skybot")


@pytest.fixture
def job(checkout_runner: None, clean_queue: None) -> Iterator[tuple[Path, str]]:
    """A script of alice's named by a fresh job name, and a fresh tag; records removed after."""
    name = f"once-{uuid.uuid4().hex[:8]}"
    path = HOFFMAN / "alice" / f"{name}.sh"
    path.write_text(
        f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --output=/dev/null\nsleep 60\n"
    )
    alice = pwd.getpwnam("alice")
    os.chown(path, alice.pw_uid, alice.pw_gid)
    try:
        yield path, uuid.uuid4().hex[:16]
    finally:
        path.unlink(missing_ok=True)
        shutil.rmtree(RECORDS, ignore_errors=True)


async def ask(request: dict[str, Any]) -> dict[str, Any]:
    return await call_runner("alice", request, prefix=AS_SKYBOT, timeout=90)


def submission(path: Path, tag: str) -> dict[str, Any]:
    return submit_request(
        script=str(path),
        options={"partition": "debug"},
        roots=[str(HOFFMAN)],
        partitions=["debug"],
        tag=tag,
    )


def tagged(tag: str) -> list[int]:
    out = subprocess.run(
        ["squeue", "-h", "-a", "-t", "all", "-o", "%i|%k"], capture_output=True, text=True
    ).stdout
    return [int(j) for j, _, c in (x.partition("|") for x in out.split()) if c == f"skybot:{tag}"]


def as_alice(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["runuser", "-u", "alice", "--", *argv], cwd="/tmp")


async def test_a_tag_submitted_again_returns_the_first_job(job: tuple[Path, str]) -> None:
    path, tag = job
    since = time.time()
    assert await ask(submit_status_request(tag, since)) == {"ok": True, "state": "absent"}
    first = await ask(submission(path, tag))
    assert first["ok"] is True, first
    again = await ask(submission(path, tag))
    assert again == first
    assert tagged(tag) == [first["job_id"]]
    status = await ask(submit_status_request(tag, since))
    assert (status["state"], status["job_id"]) == ("submitted", first["job_id"])
    record = RECORDS / "submissions" / tag
    assert record.stat().st_uid == pwd.getpwnam("alice").pw_uid
    assert record.stat().st_mode & 0o777 == 0o600


async def test_while_a_runner_holds_the_tag_status_is_running_and_submit_waits(
    job: tuple[Path, str],
) -> None:
    path, tag = job
    record = RECORDS / "submissions" / tag
    as_alice("mkdir", "-p", str(record.parent)).wait(10)
    holder = as_alice("flock", str(record), "sleep", "4")  # what a runner mid-sbatch holds
    try:
        await asyncio.sleep(1)
        reply = await ask(submit_status_request(tag, time.time()))
        assert reply == {"ok": True, "state": "running"}
        started = time.monotonic()
        submitted = await ask(submission(path, tag))
        waited = time.monotonic() - started
    finally:
        holder.wait(10)
    assert submitted["ok"] is True, submitted
    assert waited > 2, f"submit did not wait for the lock ({waited:.1f} s)"
    assert tagged(tag) == [submitted["job_id"]]


async def test_a_runner_killed_mid_sbatch_is_settled_from_slurm(job: tuple[Path, str]) -> None:
    """The record says sbatch started and nothing more (its runner was killed): the job is
    looked for by its tag, and submitting the tag again returns it rather than a second one."""
    path, tag = job
    record = RECORDS / "submissions" / tag
    as_alice("mkdir", "-p", str(record.parent)).wait(10)
    record.write_text(json.dumps({"started": time.time()}) + "\n")
    alice = pwd.getpwnam("alice")
    os.chown(record, alice.pw_uid, alice.pw_gid)
    since = time.time()
    assert await ask(submit_status_request(tag, since)) == {"ok": True, "state": "absent"}
    sbatch = subprocess.run(
        [
            *("runuser", "-u", "alice", "--", "sbatch", "--parsable", "-p", "debug"),
            f"--comment=skybot:{tag}",
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 60",
        ],
        capture_output=True,
        text=True,
        cwd="/tmp",
        check=True,
    )
    job_id = int(sbatch.stdout.strip().split(";")[0])
    status = await ask(submit_status_request(tag, since))
    assert (status["state"], status["job_id"]) == ("submitted", job_id)
    again = await ask(submission(path, tag))
    assert (again["ok"], again["job_id"]) == (True, job_id)
    assert tagged(tag) == [job_id]
