"""Failure DMs with the end of the job's output, end to end: real jobs on the test cluster,
the real bot calling the real runner through sudo AS THE SKYBOT SERVICE USER (a sudo wrapper
puts `runuser -u skybot` in front, as systemd's User= would), the Slack stand-in.

Every job writes into a directory of alice's that only she can enter, so the bot itself could
not read a byte of it; what reaches her DM was read as alice. Jobs that swap their own output
file for a FIFO or for a symlink to bob's file get a one-line reason and nothing of bob's.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from msgspec.structs import replace

from bot.config import RunnerConfig, load_config
from core.efficiency import format_gb, usage_from_sacct
from tests.support.bot_process import dms_about, linked_bot, linked_bot_config
from tests.support.cluster import sacct_json, sbatch, wait_for
from tests.support.private_jobs import LAB, owned, private_dir, submit  # noqa: F401 (a fixture)

pytestmark = pytest.mark.cluster


@pytest.fixture
def bobs_secret() -> Iterator[Path]:
    path = LAB / "bob" / f"secret-{uuid.uuid4().hex[:8]}.txt"
    path.write_text("BOB-SECRET-TOKEN\n")
    owned(path, "bob", 0o644)  # alice could read it directly: only the runner's rules stop it
    yield path
    path.unlink(missing_ok=True)


async def test_failure_dms_show_the_owners_output_and_refuse_what_is_not_hers(
    tmp_path: Path,
    clean_queue: None,
    checkout_runner: None,
    private_dir: Path,  # noqa: F811 (the fixture imported above)
    bobs_secret: Path,
) -> None:
    as_skybot = tmp_path / "sudo-as-skybot"
    as_skybot.write_text('#!/bin/sh\nexec /usr/sbin/runuser -u skybot -- /usr/bin/sudo "$@"\n')
    as_skybot.chmod(0o755)
    config = replace(linked_bot_config(tmp_path), runner=RunnerConfig(sudo=str(as_skybot)))
    # Each job runs long enough for a poll to see it (and its --output/--error patterns).
    err = '"$D/$SLURM_JOB_NAME-$SLURM_JOB_ID.err"'
    out = '"$D/$SLURM_JOB_NAME-$SLURM_JOB_ID.out"'
    async with linked_bot(config) as slack:
        crash = submit(
            private_dir,
            "crash",
            "echo 'step 1 done'\necho 'Traceback (most recent call last):' >&2\n"
            "echo 'ValueError: <!channel> bad lr' >&2\nsleep 6\nexit 3",
        )
        fifo = submit(
            private_dir, "fifo", f"echo partial >&2\nrm -f {err}\nmkfifo {err}\nsleep 6\nexit 3"
        )
        link = submit(
            private_dir, "link", f"rm -f {err}\nln -s {bobs_secret} {err}\nsleep 6\nexit 3"
        )
        huge = submit(
            private_dir,
            "huge",
            f"truncate -s 1G {out}\necho 'last words before the end' >> {out}\nsleep 6\nexit 3",
        )
        jobs = (crash, fifo, link, huge)
        await wait_for(
            lambda: all(dms_about(slack, j) for j in jobs), 120, "a DM per job", 1, in_thread=False
        )

    dms = {job_id: dms_about(slack, job_id) for job_id in jobs}
    assert all(len(texts) == 1 for texts in dms.values()), dms
    # The bot's own user could not have read any of it.
    denied = subprocess.run(
        ["runuser", "-u", "skybot", "--", "cat", f"{private_dir}/crash-{crash}.err"],
        capture_output=True,
        check=False,
    )
    assert denied.returncode != 0

    (crashed,) = dms[crash]
    assert "failed with exit code 3" in crashed
    assert (
        f"*stderr* `{private_dir}/crash-{crash}.err`, last 2 lines of 65B:\n```\n"
        "Traceback (most recent call last):\nValueError: &lt;!channel&gt; bad lr\n```"
    ) in crashed
    assert (
        f"*stdout* `{private_dir}/crash-{crash}.out`, last 1 line of 12B:\n```\nstep 1 done\n```"
        in crashed
    )

    (fifo_dm,) = dms[fifo]
    assert (
        f"*stderr* `{private_dir}/fifo-{fifo}.err`: not shown: "
        "`The file is a FIFO; skybot reads only regular files.`"
    ) in fifo_dm

    (link_dm,) = dms[link]
    assert (
        f"*stderr* `{private_dir}/link-{link}.err`: not shown: `The file is a symbolic link"
        in link_dm
    )
    everything = " ".join(str(c.params) for c in slack.calls_to("chat.postMessage"))
    assert "BOB-SECRET" not in everything

    (huge_dm,) = dms[huge]
    assert f"*stdout* `{private_dir}/huge-{huge}.out`, last 1 line of 1.0G:" in huge_dm
    assert "last words before the end" in huge_dm
    # And only alice's DM got any of it.
    for call in slack.calls_to("chat.postMessage"):
        if "```" in str(call.params.get("text")):
            assert call.params["channel"] in ("UALICE", slack.dm_channel_for("UALICE"))


async def test_a_job_that_asked_for_far_more_memory_gets_the_advice_with_saccts_figures(
    tmp_path: Path,
    clean_queue: None,
    private_dir: Path,  # noqa: F811 (the fixture imported above)
) -> None:
    notifications = replace(load_config(None).notifications, efficiency_min_minutes=0.1)
    config = linked_bot_config(tmp_path, notifications=notifications)
    async with linked_bot(config) as slack:
        hog = sbatch(
            "alice",
            "-p",
            "debug",
            "-A",
            "hoffman-lab",
            "--time=10",
            "--mem=8G",
            "-J",
            "oversized",
            f"--chdir={private_dir}",
            "--wrap",
            # Written, so resident; held past JobAcctGatherFrequency=5 s so it is sampled.
            "python3 -c 'import time; b = b\"x\" * (200 * 2**20); time.sleep(12)'",
        )
        await wait_for(lambda: dms_about(slack, hog), 120, "the hog's DM", 1, in_thread=False)
    (dm,) = dms_about(slack, hog)
    recorded = next(j for j in sacct_json(hog)["jobs"] if j["job_id"] == hog)
    usage = usage_from_sacct(recorded)
    assert usage is not None and usage.mem_peak_bytes is not None
    assert 200 * 2**20 <= usage.mem_peak_bytes < 1024**3  # the bytearray, as sacct measured it
    peak = format_gb(usage.mem_peak_bytes)
    assert (
        f"Peak memory: {peak} of 8.0 GB requested: asked for 8.0 GB, peaked at {peak}: "
        "`--mem=1G` would start sooner"
    ) in dm
    assert "CPU efficiency: " in dm and "of 1 CPU" in dm
