"""`skybot console`: the bot's main job with a prompt instead of Slack, on the real cluster."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cluster import sbatch, squeue_state, wait_until

pytestmark = pytest.mark.cluster


def test_console_answers_from_a_fresh_poll_of_the_real_cluster(
    tmp_path: Path, clean_queue: None
) -> None:
    job = sbatch(
        "alice",
        "-p",
        "hoffman-lab",
        "-A",
        "hoffman-lab",
        "--gpus-per-node=a40:2",
        "--wrap",
        "sleep 300",
    )
    # The console polls once at start: the job must be running by then, not still pending.
    wait_until(lambda: squeue_state(job) == "RUNNING", 30, "alice's job to run")
    config = tmp_path / "skybot.toml"
    config.write_text(
        f'[database]\npath = "{tmp_path}/skybot.db"\n'
        '[[labs]]\nname = "hoffman-lab"\npartition = "hoffman-lab"\naccount = "hoffman-lab"\n'
        'storage_roots = ["/srv/hoffman-lab/flash9"]\n'
    )
    typed = (
        f"/sky gpus hoffman-lab\n--as bob\n/sky why {job}\nwhy not-a-number\n/sky dfx\n"
        "images torch>=2\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli", "console", "--config", str(config), "--as", "alice"],
        input=typed,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "*`hoffman-lab`*: 2/4 GPUs in use (2 free under the cap)" in out
    assert "by user: `alice` 2" in out
    assert "(now acting as bob)" in out
    assert f"Job `{job}` (`wrap`, `alice`) has been running for" in out
    assert "not-a-number" in out and "Traceback" not in out + result.stderr
    assert "Did you mean `/sky df`?" in out
    assert out.count("as of ") >= 2
    # The sample images deploy/testcluster.sh puts in /enroot; Slack's escapes undone.
    assert "*1 image has* `torch>=2`" in out and "&gt;" not in out
