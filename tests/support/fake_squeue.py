"""A stand-in squeue (sinfo and sacct too) in a bin_dir that answers like 24.11's from a v0.0.42
document a test edits, and logs each call, so a test counts what a poll asked Slurm for."""

from __future__ import annotations

import copy
import shlex
import sys
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from bot.config import Config, DatabaseConfig, SlurmConfig, load_config

FIXTURES = Path(__file__).parents[1] / "fixtures" / "slurm" / "v0.0.42"

# The fake squeue's interpreter line: the standard library is all it needs, and without
# site-packages (-S) and the environment (-I) it starts in 10 ms, not 60-140 ms; a poll runs
# it several times.
SHEBANG = f"#!{sys.executable} -IS\n"
# Answers like 24.11's squeue from the document in squeue.json beside it.
SQUEUE = """
import json, os, sys, time
from pathlib import Path
here = Path(sys.argv[0]).parent
document = json.loads((here / "squeue.json").read_text())
if any(a.startswith("--Format=") for a in sys.argv):
    # The pending jobs' settings (scheduler/slurm/pending_changes.py), one "|"-ended field each;
    # logged apart from the JSON reads.
    with open(here / "listings.log", "a") as log:
        log.write(" ".join(sys.argv[1:]) + "\\n")
    for j in document["jobs"]:
        if j["job_state"] == ["PENDING"]:
            fields = [j["job_id"], j["array_task_string"], j["partition"], j["account"]]
            fields += [j["time_limit"]["number"], j["tres_per_node"], j["name"]]
            print("|".join(str(f) for f in fields) + "|")
    sys.exit(0)
with open(here / "calls.log", "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
jobs = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--jobs=")]
if jobs and (here / "down").exists():
    sys.exit("slurm_load_jobs error: Unable to contact slurm controller (connect failure)")
if jobs:
    # How many fetches run at once, as each sees it: every run leaves a file while it lasts.
    running = here / "running"
    running.mkdir(exist_ok=True)
    mine = running / str(os.getpid())
    mine.touch()
    with open(here / "at-once.log", "a") as log:
        log.write(f"{len(os.listdir(running))}\\n")
    slow = here / "fetch-seconds"
    time.sleep(float(slow.read_text()) if slow.exists() else 0)
    mine.unlink()
def keys(job):
    # As the real 24.11 prints them: a string; a started array task under its own job id
    # as JOB_TASK; an array's pending record as JOB_TASK for each task it stands for.
    array, task = job["array_job_id"]["number"], job["array_task_id"]
    if not array:
        return [str(job["job_id"])]
    if task["set"]:
        return [f"{job['job_id']}_{task['number']}"]
    tasks = []
    for part in job["array_task_string"].split("%")[0].split(","):
        first, _, last = part.partition("-")
        tasks += range(int(first), int(last or first) + 1)
    return [f"{job['job_id']}_{n}" for n in tasks]
if "--only-job-state" in sys.argv:
    # Ended jobs too, until MinJobAge, unlike the default listing.
    document["jobs"] = [
        {"job_id": key, "state": j["job_state"]} for j in document["jobs"] for key in keys(j)
    ]
    document["jobs"].append({"job_id": "99", "state": ["CANCELLED"]})
    # Jobs listed here that slurmctld purges before they are fetched.
    extra = here / "states-extra.json"
    document["jobs"] += json.loads(extra.read_text()) if extra.exists() else []
elif jobs:
    wanted = {int(i) for i in jobs[0].split(",")}
    document["jobs"] = [
        j for j in document["jobs"]
        if j["job_id"] in wanted or j["array_job_id"]["number"] in wanted
    ]
    if len(wanted) == 1 and not document["jobs"]:
        # As 24.11.5's, for a job slurmctld does not hold (REQUEST_JOB_INFO_SINGLE).
        sys.exit("slurm_load_jobs error: Invalid job id specified")
print(json.dumps(document))
"""


def _slurm(bin_dir: Path) -> None:
    bin_dir.mkdir()
    (bin_dir / "squeue.json").write_text((FIXTURES / "squeue.json").read_text())
    script = bin_dir / "squeue"
    script.write_text(SHEBANG + SQUEUE)
    script.chmod(0o755)
    for command, name in (("sinfo", "nodes.json"), ("sacct", "sacct.json")):
        (bin_dir / name).write_text((FIXTURES / name).read_text())
        program = bin_dir / command
        program.write_text(f"#!/bin/sh\nexec cat {shlex.quote(str(bin_dir / name))}\n")
        program.chmod(0o755)


def _config(tmp_path: Path, bin_dir: Path) -> Config:
    return replace(
        load_config(None),
        slurm=SlurmConfig(bin_dir=str(bin_dir), command_timeout_seconds=10),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
    )


def _calls(bin_dir: Path) -> list[str]:
    """squeue's arguments in each call, oldest first; then forgotten."""
    log = bin_dir / "calls.log"
    calls = log.read_text().splitlines()
    log.write_text("")
    return calls


def _fetches(bin_dir: Path) -> list[str]:
    """The --jobs= lists squeue was asked for, oldest first; then forgotten."""
    calls = _calls(bin_dir)
    return [a.split("=", 1)[1] for c in calls for a in c.split() if a.startswith("--jobs=")]


def _set_state(document: dict[str, Any], job_id: int, state: str) -> None:
    for job in document["jobs"]:
        if job["job_id"] == job_id:
            job["job_state"] = [state]


def _add_pending_jobs(document: dict[str, Any], job_ids: range) -> None:
    """New plain jobs, each a copy of the document's first pending one under a new id."""
    model = next(j for j in document["jobs"] if j["job_state"] == ["PENDING"])
    for job_id in job_ids:
        document["jobs"].append({**copy.deepcopy(model), "job_id": job_id})
