"""How jobs end, as the running bot records and tells them, checked against Slurm's own word:
an overcap job preempted, requeued, restarted after its BeginTime wait and finished gets one
preemption DM and one end DM; exit 3, SIGKILL, a time limit and scancel are recorded with the
exit code and signal `sacct -o ExitCode` gives. One test, so the waits (the BeginTime after a
requeue, the time limit) overlap."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
from pathlib import Path

import pytest

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

FINAL = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED")
# A job that works until it is preempted, and finishes at once when Slurm restarts it.
RESUMABLE = 'if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then sleep 2; exit 0; fi; sleep 300'


def _final_records(db_path: Path) -> dict[int, tuple[str, int | None, int | None]]:
    """Each job's last final transition: (state, exit code, signal)."""
    db = sqlite3.connect(db_path)
    try:
        rows = db.execute("SELECT job_id, to_state, record FROM job_transitions ORDER BY id")
        finals = {
            job_id: (state, job.exit_code, job.exit_signal)
            for job_id, state, record in rows
            if state in FINAL
            for job in [decode_job(record)]
        }
    finally:
        db.close()
    return finals


def _slurm_22_05() -> bool:
    out = subprocess.run(["sinfo", "--version"], capture_output=True, text=True, timeout=30)
    return " 22.05." in f" {out.stdout}"


def _sacct_exit_codes(job_ids: list[int]) -> dict[int, tuple[str, int, int]]:
    out = subprocess.run(
        [
            "sacct",
            "-X",
            "-n",
            "-P",
            "-o",
            "jobid,state,exitcode",
            "-j",
            ",".join(map(str, job_ids)),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    codes = {}
    for line in out.splitlines():
        job_id, state, exit_code = line.split("|")
        code, signal = exit_code.split(":")
        codes[int(job_id)] = (state.split()[0], int(code), int(signal))
    return codes


async def test_job_ends_match_sacct_and_a_restarted_overcap_job_gets_two_dms(
    tmp_path: Path, clean_queue: None
) -> None:
    config = linked_bot_config(tmp_path)
    async with linked_bot(config) as slack:
        overcap = await sbatch_async(
            "alice", "-p", "overcap", "-A", "overcap", "-w", "baymax", "--gpus-per-node=4",
            "-J", "resumable", "--wrap", RESUMABLE,
        )  # fmt: skip
        await wait_for(lambda: squeue_state(overcap) == "RUNNING", 30, "the overcap job to run")
        await wait_for_slurm_poll(config.database.path)  # the bot has seen it running
        # Takes half of baymax for 20 s: the overcap job can only restart once it is done.
        await sbatch_async(
            "carol", "-p", "kira-lab", "-A", "kira-lab", "-w", "baymax",
            "--gpus-per-node=2080_ti:2", "-J", "urgent", "--wrap", "sleep 20",
        )  # fmt: skip
        ended = {
            await sbatch_async(
                "carol", "-p", "kira-lab", "-A", "kira-lab", "--wrap", "sleep 3; exit 3"
            ),
            await sbatch_async(
                "dave", "-p", "kira-lab", "-A", "kira-lab", "--wrap", "sleep 3; kill -9 $$"
            ),
        }
        timeout_job = await sbatch_async(
            "bob", "-p", "debug", "-A", "hoffman-lab", "--time=1", "--wrap", "sleep 300"
        )
        ended.add(timeout_job)
        cancelled = await sbatch_async(
            "bob", "-p", "hoffman-lab", "-A", "hoffman-lab", "--wrap", "sleep 300"
        )
        ended.add(cancelled)
        await wait_for(lambda: squeue_state(cancelled) == "RUNNING", 30, "the job to cancel to run")
        await scancel_async(str(cancelled))
        await wait_for(lambda: squeue_state(timeout_job) == "RUNNING", 30, "the job to time out")
        await asyncio.to_thread(reach_time_limit, timeout_job)

        # Requeued at once, eligible again 30 s later (cred_expire), then done in seconds.
        await wait_for(
            lambda: (
                len(dms_about(slack, overcap)) >= 2
                and ended <= set(_final_records(Path(config.database.path)))
            ),
            240,
            "both DMs and every job's final record",
            2,
            in_thread=False,
        )
        await asyncio.sleep(6)  # a few more polls: nothing may be sent twice

    dms = dms_about(slack, overcap)
    assert len(dms) == 2, dms
    assert "was preempted and requeued (restart 1)" in dms[0], dms[0]
    assert "completed successfully" in dms[1], dms[1]
    finals = _final_records(Path(config.database.path))
    assert finals[overcap][0] == "COMPLETED"
    sacct = _sacct_exit_codes(sorted(ended))
    # A job killed by a signal has no exit code of its own; sacct prints 0 for it.
    recorded = {job_id: (s, code or 0, signal or 0) for job_id, (s, code, signal) in finals.items()}
    # 22.05's squeue gives the batch shell's SIGTERM (15) for a timed-out or cancelled job where
    # sacct -X says 0:0, and its sacct JSON cannot tell (S2411-FINDINGS.md): on 22.05 only,
    # that one difference is let through and the test reports itself as an expected failure.
    sigterm = {j for j in ended if recorded.get(j) in (("TIMEOUT", 0, 15), ("CANCELLED", 0, 15))}
    if _slurm_22_05():
        recorded |= {j: (recorded[j][0], 0, 0) for j in sigterm}
    assert {job_id: recorded.get(job_id) for job_id in ended} == sacct
    assert sorted(sacct.values()) == [
        ("CANCELLED", 0, 0),
        ("FAILED", 0, 9),
        ("FAILED", 3, 0),
        ("TIMEOUT", 0, 0),
    ]
    if sigterm and _slurm_22_05():
        pytest.xfail("22.05: SIGTERM of a timed-out/cancelled job is not sacct's ExitCode")
