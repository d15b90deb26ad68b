"""Het jobs on the real cluster (either: 22.05 on the host, 24.11 in its sandbox), through the
real bot, runner and Slack stand-in: one row, `/sky why` for a component, one Cancel that
ends every component, one DM per job naming each component and the file Slurm really wrote
(`%N` is the batch host's host name: `vm` / `slurm2411`, not its NodeName)."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.bot_process import (
    SLACK_IDS,
    dms_about,
    linked_bot,
    linked_bot_config,
    wait_for_slurm_poll,
)
from tests.support.cluster import sbatch_async, squeue_json, squeue_state, wait_for

pytestmark = pytest.mark.cluster

OUTPUT = "/tmp/skybot-het-%j-%N.out"


def _script(name: str, body: str) -> str:
    """A two-component het job script (1 and 2 GPUs), readable by the test users."""
    path = Path(f"/tmp/skybot-het-{name}-{os.getpid()}.sh")
    path.write_text(
        "#!/bin/bash\n"
        f"#SBATCH -p debug -A hoffman-lab --gres=gpu:1 -t 5 -J {name} -o {OUTPUT}\n"
        "#SBATCH hetjob\n"
        "#SBATCH -p debug -A hoffman-lab --gres=gpu:2 -t 5\n"
        "echo het job on $(hostname -s)\n"
        f"{body}\n"
    )
    path.chmod(0o644)
    return str(path)


def _number(value: Any) -> Any:
    return value.get("number") if isinstance(value, dict) else value


def _components(het_id: int) -> list[int]:
    """The job ids of the het job's components, as squeue lists them."""
    return sorted(
        job["job_id"]
        for job in squeue_json(active_only=False)["jobs"]
        if _number(job.get("het_job_id")) == het_id
    )


def _all_ended(job_ids: list[int]) -> bool:
    return all(squeue_state(job_id) in (None, "CANCELLED") for job_id in job_ids)


async def test_a_het_job_is_one_job(
    tmp_path: Path, clean_queue: None, checkout_runner: None
) -> None:
    config = linked_bot_config(tmp_path)
    async with linked_bot(config) as slack:
        long = await sbatch_async("alice", _script("het-long", "sleep 300"))
        await wait_for(lambda: squeue_state(long) == "RUNNING", 60, "the het job to run")
        components = _components(long)
        assert len(components) == 2 and components[0] == long
        await wait_for_slurm_poll(config.database.path, acted_on=True)

        answer = await slack.send_slash_command(command="/sky", text="jobs", user_id="UALICE")
        payload = answer.payload or {}
        text = str(payload.get("text"))
        assert "1 running (3 GPUs)" in text, text
        assert f"`{long}` (2 components)" in text and f"`{components[1]}`" not in text, text
        buttons = [
            e for b in payload.get("blocks", []) if b["type"] == "actions" for e in b["elements"]
        ]
        assert [b["value"] for b in buttons] == [f"skynet/{long}"]

        why = await slack.send_slash_command(command="/sky", text=f"why {long}+1", user_id="UALICE")
        why_text = str((why.payload or {}).get("text"))
        assert f"Job `{long}` (`het-long`" in why_text and f"`{long}+1 running`" in why_text

        # The one Cancel button: scancel of the het job's id, as alice, ends every component.
        click = slack.block_action_payload(
            user_id=SLACK_IDS["alice"], action_id=f"skybot_cancel_job:{long}", value=str(long)
        )
        await slack.send_block_action(click, timeout=3)
        post = await slack.wait_for_response_url_post(url=click["response_url"], timeout=60)
        assert post.body["text"] == f"Cancelled job `{long}` `het-long` (as `alice`)."
        await wait_for(lambda: _all_ended(components), 30, "every component to be cancelled")

        fails = await sbatch_async("alice", _script("het-fails", "sleep 4; exit 3"))
        fail_components = _components(fails) or [fails, fails + 1]
        await wait_for(lambda: dms_about(slack, fails) and dms_about(slack, long), 120, "the DMs")
        started = time.monotonic()
        await wait_for_slurm_poll(config.database.path, acted_on=True)
        await asyncio.sleep(max(0.0, 6 - (time.monotonic() - started)))  # nothing twice

    for het_id, other in ((long, components[1]), (fails, fail_components[1])):
        assert len(dms_about(slack, het_id)) == 1, dms_about(slack, het_id)
        assert dms_about(slack, other) == [], dms_about(slack, other)
    (cancelled,) = dms_about(slack, long)
    assert f"`{long}+0 cancelled`" in cancelled and f"`{long}+1 cancelled`" in cancelled
    (failed,) = dms_about(slack, fails)
    assert "failed with exit code 3" in failed, failed
    assert f"`{fails}+0 failed (exit 3)`" in failed and f"`{fails}+1 " in failed, failed
    # slurmd writes its own short host name for %N (src/slurmd/common/fname.c).
    written = OUTPUT.replace("%j", str(fails)).replace("%N", socket.gethostname().split(".")[0])
    assert Path(written).exists()
    assert f"Output: `{written}`" in failed, failed
    # The failure DM shows the file's last lines, read through the runner as alice.
    assert "het job on" in failed, failed
