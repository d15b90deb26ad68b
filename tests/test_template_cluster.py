"""`/sky template` against the real test cluster: every variant it writes for alice
(hoffman-lab) and carol (kira-lab) is accepted by `sbatch --test-only` / `srun --test-only`
run as that user, from a view skybot's own poller read from Slurm. `--test-only` has slurmctld
check the job (partition, account, GPUs, CPUs, memory) and say when it would start, without
creating a job: nothing runs, the queue is untouched, so no clean-up (no scancel) is needed.

The pyxis `--container-*` options live on the script's srun line, which sbatch does not parse;
the interactive line has them on srun itself, and this cluster has no pyxis plugin (srun would
say "unrecognized option"), so they are checked for presence and dropped before srun runs.
"""

from __future__ import annotations

import asyncio
import html
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from msgspec.structs import replace

from bot.config import Config, DatabaseConfig, SlurmConfig, load_config
from core.view import ClusterView
from handlers.commands import command_table
from handlers.reply import Reply
from scheduler.slurm.poller import SlurmPoller
from store.reader import SnapshotCache
from store.writer import StoreWriter
from tests.support.asking import answer_from_view
from tests.support.cluster import slurm_answers

pytestmark = pytest.mark.cluster

IMAGE = "nvcr.io_nvidia_pytorch_23.12-py3"
VARIANTS = [
    "",
    "--gpus a40:1",
    "--gpus a40:4",
    "--gpus rtx_6000:2",
    "--gpus rtx_6000:4",
    "--gpus 2080_ti:1",
    "--gpus 2080_ti:4",
    "--gpus 4",
    "--overcap",
    "--overcap --gpus a40:4",
    f"--image {IMAGE}",
    f"--image {IMAGE} --gpus rtx_6000:3",
    f"--overcap --gpus 2080_ti:2 --image {IMAGE}",
]
LAB_OF = {"alice": "hoffman-lab", "carol": "kira-lab"}
ACCEPTED = re.compile(r"^(sbatch|srun): Job \d+ to start at \S+ using \d+ processors on nodes "
                      r"\S+ in partition (\S+)$", re.MULTILINE)  # fmt: skip


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[Config, ClusterView]]:
    """A view of the real cluster, read by skybot's own poller into a scratch store.

    Not the shared `cluster` fixture: that one cancels every test user's jobs, and nothing
    here submits a job that would need cancelling.
    """
    if not slurm_answers():
        pytest.fail("the Slurm test cluster is not answering: run `deploy/testcluster.sh up`")
    with tempfile.TemporaryDirectory(prefix="skybot-template-store-") as store_dir:
        config = replace(
            load_config(None),
            slurm=SlurmConfig(poll_seconds=1, command_timeout_seconds=20),
            database=DatabaseConfig(path=str(Path(store_dir) / "skybot.db")),
        )
        yield config, asyncio.run(_poll(config))


async def _poll(config: Config) -> ClusterView:
    writer = StoreWriter(config.database.path)
    cache = SnapshotCache(config.database.path, config.default_cluster.name, config.labs)
    try:
        poller = SlurmPoller(config.default_cluster, config, writer)
        assert await poller.poll_caps(), "sacctmgr poll failed"
        assert await poller.poll_jobs(), "squeue/sinfo poll failed"
        return await cache.refresh()
    finally:
        cache.close()
        writer.close()


@pytest.fixture(scope="module")
def scripts_dir() -> Iterator[Path]:
    # pytest's tmp_path is private to root; the test users must be able to read the scripts.
    with tempfile.TemporaryDirectory(prefix="skybot-template-") as name:
        os.chmod(name, 0o755)
        yield Path(name)


def template(live: tuple[Config, ClusterView], user: str, options: str) -> str:
    """What `/sky template OPTIONS` shows USER, as they would copy it out of Slack."""
    config, view = live
    reply = answer_from_view(command_table(config.template), view, f"template {options}",
                     team_id="T1", user_id="U1", cluster_user=user)  # fmt: skip
    return _code(reply)


def _code(reply: Reply) -> str:
    sections = [b["text"]["text"] for b in reply.blocks if b["type"] == "section"]
    fenced = [s.removeprefix("```\n").removesuffix("\n```") for s in sections if s[:3] == "```"]
    assert fenced, f"no code block in: {reply.text}"
    return html.unescape("\n".join(fenced)) + "\n"


def run_as(user: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", user, "--", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/tmp",
        stdin=subprocess.DEVNULL,
    )


def sbatch_test_only(user: str, script: str, scripts_dir: Path) -> subprocess.CompletedProcess[str]:
    fd, name = tempfile.mkstemp(suffix=".sh", dir=scripts_dir)
    with os.fdopen(fd, "w") as file:
        file.write(script)
    os.chmod(name, 0o644)
    return run_as(user, ["sbatch", "--test-only", name])


def srun_test_only(user: str, line: str) -> subprocess.CompletedProcess[str]:
    command = " ".join(x for x in line.splitlines() if not x.startswith("#"))
    argv = shlex.split(command.replace("\\ ", " "))
    assert argv[0] == "srun" and argv[-2:] == ["--pty", "bash"]
    # No pyxis here (see the module docstring).
    argv = [a for a in argv if not a.startswith("--container-")]
    return run_as(user, ["srun", "--test-only", *argv[1:]])


def accepted_partition(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    match = ACCEPTED.search(result.stderr)
    assert match, result.stderr
    return match.group(2)


@pytest.mark.parametrize("user", sorted(LAB_OF))
@pytest.mark.parametrize("options", VARIANTS)
def test_batch_template_passes_sbatch_test_only(
    live: tuple[Config, ClusterView], scripts_dir: Path, user: str, options: str
) -> None:
    script = template(live, user, options)
    assert f"#SBATCH --output=/srv/{LAB_OF[user]}/" in script
    if "--image" in options:
        assert f"--container-image=/enroot/{IMAGE}.sqsh" in script
        assert "#SBATCH --container" not in script
    expected = "overcap" if "--overcap" in options else LAB_OF[user]
    assert accepted_partition(sbatch_test_only(user, script, scripts_dir)) == expected


@pytest.mark.parametrize("user", sorted(LAB_OF))
@pytest.mark.parametrize("options", VARIANTS)
def test_interactive_line_passes_srun_test_only(
    live: tuple[Config, ClusterView], user: str, options: str
) -> None:
    line = template(live, user, f"{options} --interactive")
    if "--image" in options:
        assert f"--container-image=/enroot/{IMAGE}.sqsh" in line
    expected = "overcap" if "--overcap" in options else LAB_OF[user]
    assert accepted_partition(srun_test_only(user, line)) == expected


def test_cpus_fit_the_real_nodes(live: tuple[Config, ClusterView]) -> None:
    # The test cluster's nodes have 32 CPUs: the guide's 15 per A40 cannot fit four tasks.
    assert {n.cpus for n in live[1].snapshot.nodes} == {32}
    assert "#SBATCH --cpus-per-task=8\n" in template(live, "alice", "--gpus a40:4")
    assert "#SBATCH --cpus-per-task=15\n" in template(live, "alice", "--gpus a40:2")


def test_another_labs_template_is_refused(
    live: tuple[Config, ClusterView], scripts_dir: Path
) -> None:
    """The check can fail: alice's script and srun line, run as carol, are refused by Slurm."""
    for options in ("", "--gpus a40:2"):
        result = sbatch_test_only("carol", template(live, "alice", options), scripts_dir)
        assert result.returncode != 0
        assert "Invalid account or account/partition combination" in result.stderr
    result = srun_test_only("carol", template(live, "alice", "--interactive"))
    assert result.returncode != 0
    assert "Invalid account or account/partition combination" in result.stderr


def test_test_only_leaves_no_job_behind(
    live: tuple[Config, ClusterView], scripts_dir: Path
) -> None:
    result = sbatch_test_only("alice", template(live, "alice", "--gpus a40:1"), scripts_dir)
    job_id = re.search(r"Job (\d+) to start", result.stderr)
    assert job_id, result.stderr
    listed = subprocess.run(["squeue", "-h", "-j", job_id.group(1)], capture_output=True,
                            text=True, timeout=30)  # fmt: skip
    assert listed.stdout.strip() == ""
