"""Crash test: 200 jobs end while `skybot run` is SIGKILLed and restarted; no DM is lost."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.bot_process import SLACK_IDS, TEAM, linked_users, start_bot, wait_for_slurm_poll
from tests.support.cluster import sbatch_async, squeue_json, wait_for
from tests.support.slack_standin import SlackStandIn

pytestmark = pytest.mark.cluster

ACCOUNTS = {"alice": "hoffman-lab", "bob": "hoffman-lab", "carol": "kira-lab", "dave": "kira-lab"}
JOBS = 200
_DIGEST = re.compile(r"(\d+) of your jobs on cluster `[^`]+` changed state")
_SINGLE = re.compile(r"\bJob (\d+)\b")


def _jobs_reported(text: str) -> int:
    """How many job ends one DM reports: a digest says how many; a single DM is one."""
    digest = _DIGEST.search(text)
    if digest:
        return int(digest.group(1))
    return 1 if _SINGLE.search(text) else 0


@pytest.mark.lane_only
async def test_200_job_ends_across_a_sigkill_are_all_delivered(
    tmp_path: Path, clean_queue: None
) -> None:
    links = ", ".join(f'"{TEAM}/{sid}" = "{user}"' for user, sid in SLACK_IDS.items())
    config_file = tmp_path / "skybot.toml"
    config_file.write_text(
        f'[slack]\nmode = "socket"\n[slurm]\npoll_seconds = 2\n'
        f'[database]\npath = "{tmp_path}/skybot.db"\n'
        f"[identity]\nlinks = {{ {links} }}\n"
        '[notifications]\ndefault_preference = "all"\n'
    )
    async with SlackStandIn(users=linked_users()) as slack:

        def start() -> subprocess.Popen[bytes]:
            return start_bot(config_file, slack)

        started = time.time()
        bot = start()
        restarted: subprocess.Popen[bytes] | None = None
        try:
            await slack.wait_for_socket_connection(timeout=20)
            # The bot is a process here (to be SIGKILLed), so not `linked_bot`; its opening.
            await wait_for_slurm_poll(tmp_path / "skybot.db", after=started, acted_on=True)
            names = list(SLACK_IDS)
            submitted = []
            for i in range(JOBS):
                user = names[i % len(names)]
                account = ACCOUNTS[user]
                submitted.append(
                    await sbatch_async(
                        user,
                        "-p",
                        account,
                        "-A",
                        account,
                        "-J",
                        f"crash-{i}",
                        "--output=/dev/null",
                        "--wrap",
                        f"sleep {1 + i % 3}",
                    )
                )
                if i == JOBS // 2:
                    # Mid-stream: the bot dies without warning, jobs keep ending.
                    bot.send_signal(signal.SIGKILL)
                    bot.wait(timeout=10)
            await asyncio.sleep(5)
            restarted = start()
            await slack.wait_for_socket_connection(count=2, timeout=20)
            await wait_for(lambda: not squeue_json()["jobs"], 180, "all 200 jobs to end")

            def reported() -> int:
                return sum(
                    _jobs_reported(str(c.params.get("text")))
                    for c in slack.calls_to("chat.postMessage")
                    if c.ok
                )

            what = f"{JOBS} job ends reported"
            await wait_for(lambda: reported() >= JOBS, 120, what, 1, in_thread=False)
            await asyncio.sleep(8)  # more polls: late duplicates would show up here
        finally:
            for process in (bot, restarted):
                if process is not None and process.poll() is None:
                    process.terminate()
                    process.wait(timeout=20)

    total = reported()
    duplicates = total - JOBS
    dms = sum(1 for c in slack.calls_to("chat.postMessage") if c.ok)
    print(
        f"{JOBS} job ends, bot SIGKILLed after {JOBS // 2} submissions and restarted: "
        f"{dms} DMs reporting {total} job ends, {duplicates} duplicates"
    )
    assert total >= JOBS, f"only {total} of {JOBS} job ends reached their owners"
    # Only what was in flight at the kill may repeat: at most one poll's worth.
    assert duplicates <= 20
