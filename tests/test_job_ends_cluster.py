"""Job ends on the real cluster: each announced once, with the exit code sacct shows.

The real bot and the Slack stand-in, as in test_job_dms_cluster.py; sacct's own
`ExitCode` column is the reference for every way a job can end here.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from bot.config import (
    Config,
    SlurmConfig,
)
from core.record_codec import decode_job
from tests.support.bot_process import dms_about, linked_bot, linked_bot_config, wait_for_slurm_poll
from tests.support.cluster import (
    reach_time_limit,
    sbatch_async,
    scancel_async,
    squeue_state,
    wait_for,
)

pytestmark = pytest.mark.cluster

# Longer than MinJobAge (10 s) plus a poll: once squeue has forgotten a job, sacct's window
# still holds its end, which is when a wrong restart count would announce it again.
LOOK_BACK = 20.0


def _sacct_exit_code(job_id: int) -> tuple[int, int]:
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-o", "ExitCode", "-j", str(job_id)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.split()
    code, signal = out[-1].split(":")
    return int(code), int(signal)


def _final_records(config: Config, job_id: int) -> list[tuple[str, int | None, int | None]]:
    with sqlite3.connect(config.database.path) as db:
        rows = db.execute(
            "SELECT to_state, record FROM job_transitions WHERE job_id = ? ORDER BY id", [job_id]
        ).fetchall()
    return [
        (state, job.exit_code, job.exit_signal)
        for state, job in ((r[0], decode_job(r[1])) for r in rows)
        if job.is_final
    ]


async def test_preempted_job_cancelled_past_the_look_back_ends_once(
    tmp_path: Path, clean_queue: None
) -> None:
    """Preempted and requeued, then cancelled well after sacct's (shortened) look-back has
    slid past the preempted run: one preemption DM and one end DM, nothing more."""
    config = linked_bot_config(
        tmp_path, SlurmConfig(poll_seconds=2, sacct_overlap_seconds=LOOK_BACK)
    )
    async with linked_bot(config) as slack:
        overcap = await sbatch_async("alice", "-p", "overcap", "-A", "overcap", "-w", "baymax",
                                     "--gpus-per-node=4", "-J", "sweep",
                                     "--wrap", "sleep 600")  # fmt: skip
        await wait_for(lambda: squeue_state(overcap) == "RUNNING", 30, "the overcap job to run")
        await wait_for_slurm_poll(config.database.path)  # the bot has seen it running
        await sbatch_async("carol", "-p", "kira-lab", "-A", "kira-lab", "-w", "baymax",
                           "--gpus-per-node=2080_ti:2", "-J", "urgent",
                           "--wrap", "sleep 600")  # fmt: skip
        await wait_for(lambda: dms_about(slack, overcap), 60, "the requeue's DM", in_thread=False)
        # Requeued, waiting its BeginTime.
        assert await asyncio.to_thread(squeue_state, overcap) == "PENDING"
        await asyncio.sleep(LOOK_BACK + 5)  # sacct's window no longer holds the preemption
        await scancel_async(str(overcap))
        cancelled = time.monotonic()
        await wait_for(
            lambda: len(dms_about(slack, overcap)) >= 2, 60, "the end's DM", in_thread=False
        )
        # Past MinJobAge only sacct lists the job, with just the cancelled run in its window
        # (22.05 has no restart count of its own), until the look-back passes the end too:
        # the bot polls through both (squeue has forgotten the job, the look-back has passed
        # its end) before the DMs are counted.
        await wait_for(lambda: squeue_state(overcap) is None, 60, "squeue to forget the job")
        await asyncio.sleep(max(0.0, LOOK_BACK + 5 - (time.monotonic() - cancelled)))
        await wait_for_slurm_poll(config.database.path, acted_on=True)

    dms = dms_about(slack, overcap)
    assert len(dms) == 2, dms
    assert "was preempted and requeued (restart 1)" in dms[0]
    assert "was cancelled" in dms[1]


async def test_exit_code_and_signal_are_what_sacct_shows(tmp_path: Path, clean_queue: None) -> None:
    config = linked_bot_config(
        tmp_path, SlurmConfig(poll_seconds=2, sacct_overlap_seconds=LOOK_BACK)
    )
    common = ("-p", "debug", "-A", "hoffman-lab")
    async with linked_bot(config) as slack:
        jobs = {
            # An output file that cannot be created: the job fails at launch.
            "launch": await sbatch_async("bob", *common, "-J", "launch",
                                         "-o", "/nonexistent/dir/%j.out", "--wrap", "true"),
            "chdir": await sbatch_async("bob", *common, "-J", "chdir",
                                        "--chdir=/nonexistent/dir", "--wrap", "true"),
            "exit3": await sbatch_async("bob", *common, "-J", "exit3", "--wrap", "sleep 1; exit 3"),
            "killed": await sbatch_async("bob", *common, "-J", "killed",
                                         "--wrap", "sleep 1; kill -9 $$"),
            "segv": await sbatch_async("bob", *common, "-J", "segv",
                                       "--wrap", "sleep 1; kill -SEGV $$"),
            "timeout": await sbatch_async("bob", *common, "-J", "timeout", "--time=1",
                                          "--wrap", "sleep 600"),
            "cancel": await sbatch_async("bob", *common, "-J", "cancel", "--wrap", "sleep 600"),
        }  # fmt: skip
        await wait_for(lambda: squeue_state(jobs["cancel"]) == "RUNNING", 30, "a job to run")
        await wait_for(lambda: squeue_state(jobs["timeout"]) == "RUNNING", 30, "a job to run")
        await wait_for_slurm_poll(config.database.path)  # the bot has seen it running
        await scancel_async(str(jobs["cancel"]))
        await asyncio.to_thread(reach_time_limit, jobs["timeout"])
        await wait_for(
            lambda: all(dms_about(slack, job_id) for job_id in jobs.values()),
            180,
            "a DM per job",
            1,
            in_thread=False,
        )
        await asyncio.sleep(4)

    expected_words = {
        "launch": "failed with exit code {code}, signal {signal}",
        "chdir": "failed with exit code {code}, signal {signal}",
        "exit3": "failed with exit code {code}.",
        "killed": "failed with exit code {code}, signal {signal} (SIGKILL)",
        "segv": "failed with exit code {code}, signal {signal} (SIGSEGV)",
        "timeout": "reached its time limit",
        "cancel": "was cancelled",
    }
    for name, job_id in jobs.items():
        code, signal = _sacct_exit_code(job_id)
        assert _final_records(config, job_id) == [(_final_state(name), code, signal or None)], name
        dms = dms_about(slack, job_id)
        assert len(dms) == 1, (name, dms)
        assert expected_words[name].format(code=code, signal=signal) in dms[0], (name, dms[0])
    # The cases themselves, so a Slurm that changes them is noticed.
    assert _sacct_exit_code(jobs["exit3"]) == (3, 0)
    assert _sacct_exit_code(jobs["killed"]) == (0, 9)
    assert _sacct_exit_code(jobs["launch"])[1] != 0


def _final_state(name: str) -> str:
    return {"timeout": "TIMEOUT", "cancel": "CANCELLED"}.get(name, "FAILED")
