"""A bot whose only cluster is reached through slurmrestd (22.05 over TCP; 24.11, in its lane,
over the socket), with no Slurm command it could run: it answers `/sky gpus` and `/sky jobs`
and DMs a job's end, and its change probe tells that end well before the next poll would."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.bot_process import (
    SLACK_IDS,
    TEAM,
    VERBOSE_SKYBOT,
    dms_about,
    linked_users,
    start_bot,
    wait_for_slurm_poll,
)
from tests.support.cluster import cluster_script, sbatch_async, wait_for
from tests.support.factories import CLUSTER
from tests.support.restd_daemon import INSIDE_2411, SOCKET, mint
from tests.support.slack_standin import SlackStandIn

pytestmark = pytest.mark.cluster

SLURM_COMMANDS = ("squeue", "sinfo", "sacct", "scontrol", "sdiag", "sacctmgr", "sbatch", "scancel")
# TCP on the host; the sandbox's (24.11) daemon listens on its socket only.
URL = SOCKET if INSIDE_2411 else "http://127.0.0.1:6820"
# Long enough that, without the probe, a job's end would wait for it.
POLL_SECONDS = 60


def _shims(directory: Path, log: Path) -> None:
    """Each Slurm command, as a script that writes its name to `log` and fails."""
    directory.mkdir()
    for command in SLURM_COMMANDS:
        shim = directory / command
        shim.write_text(f'#!/bin/sh\necho {command} "$@" >> {log}\nexit 1\n')
        shim.chmod(0o755)


def _config(tmp_path: Path, shims: Path, token: Path) -> Path:
    links = ", ".join(f'"{TEAM}/{sid}" = "{user}"' for user, sid in SLACK_IDS.items())
    labs = "".join(
        f'[[clusters.labs]]\nname = "{lab}"\npartition = "{lab}"\naccount = "{lab}"\n'
        for lab in ("hoffman-lab", "kira-lab")
    )
    config_file = tmp_path / "skybot.toml"
    config_file.write_text(
        f'[slack]\nmode = "socket"\n[database]\npath = "{tmp_path}/skybot.db"\n'
        f"[identity]\nlinks = {{ {links} }}\n"
        # Named as tests.support.bot_process's helpers read the store: rows are keyed by cluster.
        f'[[clusters]]\nname = "{CLUSTER}"\nsource = "slurmrestd"\n'
        f'url = "{URL}"\n'
        f'token_file = "{token}"\n'
        f'[clusters.slurm]\nbin_dir = "{shims}"\npoll_seconds = {POLL_SECONDS}\n{labs}'
    )
    return config_file


def _slurm_end(job_id: int) -> float | None:
    out = subprocess.run(
        ["sacct", "--json", "-j", str(job_id)], capture_output=True, text=True, check=True
    ).stdout
    ends = [j["time"]["end"] for j in json.loads(out)["jobs"] if j["job_id"] == job_id]
    return float(ends[0]) if ends and ends[0] else None


async def test_a_slurmrestd_only_bot_answers_and_dms_without_slurm_commands(
    tmp_path: Path, clean_queue: None
) -> None:
    cluster_script("up")  # slurmrestd running, slurm.conf with JWT
    ran = tmp_path / "slurm-commands-run.log"
    shims = tmp_path / "bin"
    _shims(shims, ran)
    token = tmp_path / "skybot.jwt"
    mint(token, 3600)
    config_file = _config(tmp_path, shims, token)
    # Only the shims on PATH: any Slurm command the bot ran by name or from bin_dir is logged.
    environment = {**os.environ, "PATH": str(shims)}
    async with SlackStandIn(users=linked_users()) as slack:
        started = time.time()
        log = (tmp_path / "bot.log").open("wb")
        bot = start_bot(config_file, slack, VERBOSE_SKYBOT, environment=environment, log=log)
        try:
            await slack.wait_for_socket_connection(timeout=20)
            # The first poll stored; the next is 60 s away, the probe's only on a change.
            await wait_for_slurm_poll(tmp_path / "skybot.db", after=started)

            async def answer(text: str, user: str) -> str:
                delivery = await slack.send_slash_command(command="/sky", text=text, user_id=user)
                return json.dumps(delivery.payload)

            async def gpus_in_use() -> bool:
                return "GPUs in use" in await answer("gpus", "UALICE")

            await wait_for(gpus_in_use, 20, "/sky gpus to show GPUs in use")

            job = await sbatch_async(
                "dave", "-p", "kira-lab", "-A", "kira-lab", "-J", "restd-only", "--wrap", "sleep 4"
            )

            # Shown by the probe's poll, long before the 60 s poll.

            async def listed() -> bool:
                return str(job) in await answer("jobs", "UDAVE")

            await wait_for(listed, 20, "/sky jobs to list the new job")

            await wait_for(lambda: dms_about(slack, job) or None, 40, "the job-end DM")
            told = time.time()
            end = await wait_for(lambda: _slurm_end(job), 30, "sacct's end time")
            assert "completed" in dms_about(slack, job)[0]
            # Told within a few seconds of its end, not at the next 60 s poll.
            assert told - end < 10, f"DM {told - end:.1f} s after the job's end"
        finally:
            bot.terminate()
            bot.wait(timeout=30)
    assert bot.returncode == 0
    assert not ran.exists(), f"Slurm commands ran: {ran.read_text()}"
