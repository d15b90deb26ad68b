"""The output file a failure DM names is the one Slurm wrote, for every pattern letter a batch
script's `--output` can use, on the real cluster (either), through the real bot and runner.

slurmd fills `%N` with its own short host name (the node's NodeHostname: `vm` on 22.05,
`slurm2411` in the 24.11 sandbox, where the NodeNames are clippy, xaea-12 and baymax), `%s`
with `batch`, `%n` and `%t` with 0 (src/slurmd/common/fname.c)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support.bot_process import dms_about, linked_bot, linked_bot_config
from tests.support.cluster import sbatch_async, wait_for

pytestmark = pytest.mark.cluster


async def test_a_failure_dm_names_the_file_slurm_wrote(
    tmp_path: Path, clean_queue: None, checkout_runner: None
) -> None:
    pattern = "/tmp/skybot-pat-%x-%j-%s-%t-%n-%J-%N-%6j.out"
    config = linked_bot_config(tmp_path)
    async with linked_bot(config) as slack:
        job_id = await sbatch_async(
            "alice", "-p", "debug", "-A", "hoffman-lab", "-J", "patterns", "-o", pattern,
            "--wrap", "echo the last line; exit 4",
        )  # fmt: skip
        await wait_for(lambda: dms_about(slack, job_id), 60, "the failure DM")
    (dm,) = dms_about(slack, job_id)
    host = socket.gethostname().split(".")[0]
    written = f"/tmp/skybot-pat-patterns-{job_id}-batch-0-0-{job_id}-{host}-{job_id:06d}.out"
    assert Path(written).exists(), sorted(str(p) for p in Path("/tmp").glob("skybot-pat-*"))
    assert f"Output: `{written}`" in dm, dm
    assert "the last line" in dm, dm  # read through the runner, as alice, from that file
