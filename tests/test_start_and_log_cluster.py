"""Start DMs and `/sky log` end to end: a real held-then-released job, the real runner, the bot.

alice turns start DMs on; her job is held, then released: the DM names the node and GPUs
`scontrol -d show job` shows. The job writes a line a second to a file in a 0700 directory of
alice's, so what `/sky log` shows was read as alice. bob's `/sky log` of her job is refused
before any runner call: every call goes through a sudo wrapper that counts them.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from msgspec.structs import replace

from bot.config import RunnerConfig
from tests.support.bot_process import (
    SLACK_IDS,
    TEAM,
    linked_bot,
    linked_bot_config,
    wait_for_slurm_poll,
)
from tests.support.cluster import sbatch_async, squeue_state, wait_for
from tests.support.private_jobs import job_script, private_dir  # noqa: F401 (a fixture)
from tests.support.slack_standin import SlackStandIn

pytestmark = pytest.mark.cluster


async def sky(slack: SlackStandIn, user: str, text: str) -> str:
    answer = await slack.slash_command_answer(
        command="/sky", text=text, user_id=SLACK_IDS[user], team_id=TEAM,
        channel_id=slack.dm_channel_for(SLACK_IDS[user]), timeout=10,
    )  # fmt: skip
    return str(answer["text"])


def start_dms(slack: SlackStandIn, job_id: int) -> list[str]:
    return [
        str(call.params.get("text"))
        for call in slack.calls_to("chat.postMessage")
        if call.ok and str(call.params.get("text")).startswith(f"▶️ Job {job_id} ")
    ]


def allocated(job_id: int) -> tuple[str, str]:
    """(node, TYPE:N) as `scontrol -d show job` shows the job's allocation."""
    out = subprocess.run(
        ["scontrol", "-d", "show", "job", str(job_id)], capture_output=True, text=True, check=True
    ).stdout
    detail = re.search(r"^\s*Nodes=(\S+) .*\bGRES=gpu:(\w+):(\d+)", out, re.MULTILINE)
    assert detail is not None, out
    return detail[1], f"{detail[2]}:{detail[3]}"


def runner_calls(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.mark.timeout(300)
async def test_start_dm_of_a_released_job_and_its_log_as_alice_only(
    tmp_path: Path,
    clean_queue: None,
    checkout_runner: None,
    private_dir: Path,  # noqa: F811
) -> None:
    calls = tmp_path / "runner-calls"
    counting = tmp_path / "sudo-counting"
    counting.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec /usr/bin/sudo "$@"\n')
    counting.chmod(0o755)
    config = replace(linked_bot_config(tmp_path), runner=RunnerConfig(sudo=str(counting)))
    script = job_script(
        private_dir, "ticker", 'for i in $(seq 1 300); do echo "tick $i <!channel>"; sleep 1; done'
    )
    async with linked_bot(config) as slack:
        assert (await sky(slack, "alice", "notify start on")).startswith("Done: you will get a DM")
        job_id = await sbatch_async(
            "alice", "--hold", "-p", "hoffman-lab", "-A", "hoffman-lab",
            "--gpus-per-node=a40:2", "--time=10", "-J", "ticker", f"--chdir={private_dir}",
            "-o", f"{private_dir}/%x-%j.out", str(script),
        )  # fmt: skip
        await wait_for_slurm_poll(config.database.path, acted_on=True)
        assert squeue_state(job_id) == "PENDING" and not start_dms(slack, job_id)
        subprocess.run(["scontrol", "release", str(job_id)], check=True, timeout=30)
        await wait_for(lambda: start_dms(slack, job_id), 60, "the start DM")
        node, gpus = allocated(job_id)

        out_file = private_dir / f"ticker-{job_id}.out"
        await wait_for(lambda: out_file.exists() and "tick 5 " in out_file.read_text(), 30, "ticks")
        shown = await sky(slack, "alice", f"log {job_id} --lines 5")
        last_tick = int(re.findall(r"tick (\d+) ", out_file.read_text())[-1])

        before = runner_calls(calls)
        refused = await sky(slack, "bob", f"log {job_id}")
        after = runner_calls(calls)
        await wait_for_slurm_poll(config.database.path, acted_on=True)
    (dm,) = start_dms(slack, job_id)
    assert dm.startswith(f"▶️ Job {job_id} `ticker` started on `{node}` (`{gpus}`), time limit "), dm
    assert gpus == "a40:2"
    assert f"Output: `{out_file}`" in dm

    assert shown.startswith(f"Job {job_id} `ticker` (`running`), read as `alice`:"), shown
    ticks = [int(t) for t in re.findall(r"tick (\d+) &lt;!channel&gt;", shown)]
    assert len(ticks) == 5 and ticks == list(range(ticks[0], ticks[0] + 5)), shown
    assert last_tick - 2 <= ticks[-1] <= last_tick, (ticks, last_tick)
    assert before >= 1  # alice's read went through the counted runner

    assert refused == (
        f"Job {job_id} belongs to `alice`, not to you (`bob`): skybot shows a job's output only "
        "to its owner, so nothing was read."
    )
    assert after == before
