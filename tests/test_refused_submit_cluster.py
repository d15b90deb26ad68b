"""A job sbatch refuses gets one message, sbatch's reason, and no job-end DM for the record
22.05's slurmdbd keeps of it (FAILED, `1:0`, never on a node: issue 26 item 7). The real bot,
the Slack stand-in, the runner through sudo, `/sky submit` as alice."""

from __future__ import annotations

import asyncio
import os
import pwd
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.bot_process import (
    SLACK_IDS,
    dms_about,
    linked_bot,
    linked_bot_config,
    wait_for_slurm_polls_acted_on,
)
from tests.support.cluster import wait_for

pytestmark = pytest.mark.cluster

ALICE_DIR = Path("/srv/hoffman-lab/flash9/alice")
# No node has nine a40s: sbatch answers "Requested node configuration is not available".
SCRIPT = (
    "#!/bin/bash\n#SBATCH --partition=hoffman-lab\n#SBATCH --account=hoffman-lab\n"
    "#SBATCH --gpus-per-node=a40:9\n#SBATCH --output=/dev/null\nsleep 1\n"
)


def refused_jobs(user: str, since: float) -> list[int]:
    """Job ids slurmdbd recorded for `user` since `since` (the refused one among them)."""
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-u", user, "-o", "JobID,State,NodeList",
         "-S", time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 1))],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    return [
        int(line.split("|")[0])
        for line in out.splitlines()
        if line.split("|")[0].isdigit() and line.split("|")[1] == "FAILED"
    ]


async def test_a_refused_sbatch_gets_one_message(
    tmp_path: Path, clean_queue: None, checkout_runner: None
) -> None:
    script = ALICE_DIR / "too-many-gpus.sh"
    entry = pwd.getpwnam("alice")
    script.write_text(SCRIPT)
    os.chown(script, entry.pw_uid, entry.pw_gid)
    config = linked_bot_config(tmp_path)
    try:
        async with linked_bot(config) as slack:
            started = time.time()
            delivery = await slack.send_slash_command(
                command="/sky", text=f"submit {script}", user_id=SLACK_IDS["alice"], timeout=10
            )
            assert delivery.payload is not None
            refusal = await slack.wait_for_call(
                "chat.postMessage",
                timeout=60,
                predicate=lambda c: "Could not submit" in str(c.params.get("text")),
            )
            assert "Requested node configuration is not available" in str(refusal.params["text"])
            # 22.05's slurmdbd records the refused job; a version that keeps no record of it
            # has nothing to mistake for an end.
            try:
                what = "sacct's record of the refused job"
                recorded = await wait_for(lambda: refused_jobs("alice", started), 10, what)
            except AssertionError:
                recorded = []
            # Polls that read sacct's record of it, and the notifier after them.
            await wait_for_slurm_polls_acted_on(config.database.path, 3)
            await asyncio.sleep(2)  # the outbox's send
            for job_id in recorded:
                assert dms_about(slack, job_id) == []
            to_alice = [
                str(c.params.get("text"))
                for c in slack.calls_to("chat.postMessage")
                if c.ok and c.params.get("channel") in ("UALICE", slack.dm_channel_for("UALICE"))
            ]
            assert [t for t in to_alice if "Could not submit" in t] != []
            assert [t for t in to_alice if "failed with exit code" in t] == [], to_alice
    finally:
        script.unlink(missing_ok=True)
