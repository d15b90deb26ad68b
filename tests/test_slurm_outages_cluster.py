"""Slurm's own outages, with the real bot on a 5 s poll (issue 18).

A hung slurmctld (SIGSTOP, as a wedged controller looks: its port open, nothing answered)
and a stopped slurmdbd, each for 60 s, on the real test cluster; users ask over the Slack
stand-in while it lasts. What must hold: the part that is down is named, what is healthy
stays current, skybot is current again within one poll interval of Slurm answering, and
every job that ended meanwhile gets one DM with the exit code sacct records.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from bot.config import SlurmConfig
from tests.support.bot_process import SLACK_IDS, dms_about, linked_bot, linked_bot_config
from tests.support.cluster import cluster_script, sbatch, squeue_state, wait_for
from tests.support.slack_standin import SlackStandIn

pytestmark = pytest.mark.cluster

POLL_SECONDS = 5.0
OUTAGE_SECONDS = 60.0


def _source_error(database: Path, source: str) -> str | None:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        row = db.execute("SELECT error FROM source_status WHERE source = ?", [source]).fetchone()
    return row[0] if row else None


async def _ask(slack: SlackStandIn, user: str, text: str) -> str:
    delivery = await slack.send_slash_command(
        command="/sky", text=text, user_id=SLACK_IDS[user], timeout=10
    )
    payload = delivery.payload or {}
    return str(payload.get("text", ""))


async def _answer_without_warning(slack: SlackStandIn, user: str, text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while "⚠️" in (answer := await _ask(slack, user, text)):
        if time.monotonic() > deadline:
            raise AssertionError(f"still warned after {timeout:g} s: {answer}")
        await asyncio.sleep(0.2)
    return answer


def _sacct_exit_code(job_id: int) -> str:
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-o", "ExitCode", "-j", str(job_id)],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    return out.strip()


async def test_a_hung_controller_is_named_and_skybot_is_current_one_poll_after_it_answers(
    tmp_path: Path, clean_queue: None
) -> None:
    # Slurm commands time out after 3 s, so failures come quickly and the back-off grows
    # past a minute during the outage: recovery must not wait for it.
    config = linked_bot_config(
        tmp_path, slurm=SlurmConfig(poll_seconds=POLL_SECONDS, command_timeout_seconds=3)
    )
    database = Path(config.database.path)
    running = sbatch("alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "--wrap", "sleep 600")
    async with linked_bot(config) as slack:
        await wait_for(lambda: squeue_state(running) == "RUNNING", 30, "alice's job to run")
        await asyncio.sleep(POLL_SECONDS + 1)  # one poll has seen it running
        assert f"`{running}`" in await _ask(slack, "alice", "jobs")
        await asyncio.to_thread(cluster_script, "pause-controller")
        resumed_at = 0.0
        try:
            await wait_for(lambda: _source_error(database, "slurm"), 60, "a failed poll")
            during = await _ask(slack, "alice", "jobs")
            assert "The Slurm controller (slurmctld) has not answered" in during, during
            assert f"`{running}`" in during, "the last good snapshot is still shown"
            await asyncio.sleep(max(0.0, OUTAGE_SECONDS - 20))
        finally:
            await asyncio.to_thread(cluster_script, "resume-controller")
            resumed_at = time.monotonic()
        # What alice sees, not the database: the poll writes its success, and then the
        # snapshot the commands answer from is refreshed (asking between the two, on a loaded
        # host, once got the outage's warning).
        after = await _answer_without_warning(slack, "alice", "jobs", timeout=60)
        recovered_after = time.monotonic() - resumed_at
        print(f"hung controller: current answer {recovered_after:.1f} s after SIGCONT")
        assert recovered_after <= POLL_SECONDS + 2, (recovered_after, after)
        assert _source_error(database, "slurm") is None
        assert f"`{running}`" in after


async def test_accounting_down_keeps_the_live_view_and_every_end_is_told_once_after(
    tmp_path: Path, clean_queue: None
) -> None:
    config = linked_bot_config(tmp_path, slurm=SlurmConfig(poll_seconds=POLL_SECONDS))
    database = Path(config.database.path)
    async with linked_bot(config) as slack:
        await asyncio.to_thread(cluster_script, "stop-accounting")
        try:
            await wait_for(
                lambda: _source_error(database, "accounting"), 30, "sacct to fail a poll"
            )
            started = sbatch("bob", "-p", "hoffman-lab", "-A", "hoffman-lab", "--wrap", "sleep 600")
            ended = {
                sbatch("carol", "-p", "kira-lab", "-A", "kira-lab", "--wrap", "sleep 2; exit 3"): 3,
                sbatch("dave", "-p", "kira-lab", "-A", "kira-lab", "--wrap", "sleep 2"): 0,
                sbatch(
                    "alice",
                    "-p",
                    "debug",
                    "-A",
                    "hoffman-lab",
                    "-o",
                    "/dev/null",
                    "--wrap",
                    "sleep 2; exit 4",
                ): 4,
            }
            await wait_for(lambda: squeue_state(started) == "RUNNING", 30, "bob's job to run")
            await asyncio.sleep(POLL_SECONDS + 1)
            answer = await _ask(slack, "bob", "jobs")
            assert f"`{started}`" in answer, f"squeue is followed while slurmdbd is down: {answer}"
            assert "Slurm accounting (slurmdbd) has not answered" in answer, answer
            assert "controller" not in answer, answer
            await asyncio.sleep(max(0.0, OUTAGE_SECONDS - 2 * POLL_SECONDS - 10))
        finally:
            await asyncio.to_thread(cluster_script, "up")
        await wait_for(
            lambda: _source_error(database, "accounting") is None, 60, "sacct to answer again"
        )
        for job_id in ended:
            await wait_for(lambda j=job_id: dms_about(slack, j), 60, f"job {job_id}'s DM")
        await asyncio.sleep(3 * POLL_SECONDS)  # sacct's catch-up must not tell them again
        for job_id, code in ended.items():
            (dm,) = dms_about(slack, job_id)
            # slurmdbd may list the job a little after skybot told its end (seen in CI: ''):
            # after the outage slurmctld hands it the queued records at its own pace.
            recorded = str(
                await wait_for(
                    lambda j=job_id: _sacct_exit_code(j) or None, 60, f"sacct to list {job_id}"
                )
            )
            assert recorded.split(":")[0] == str(code), recorded
            if code:
                assert re.search(rf"exit code {code}\b", dm), dm
        alice_job = next(j for j, c in ended.items() if c == 4)
        assert "Output: `/dev/null`" in dms_about(slack, alice_job)[0]
