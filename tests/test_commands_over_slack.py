"""Every read-only /sky command through the Slack stand-in, over Socket Mode and signed HTTP,
answered from a snapshot the bot's own poller took of the real test cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from msgspec.structs import replace

from bot.config import (
    DatabaseConfig,
    IdentityConfig,
    SlackConfig,
    SlurmConfig,
    load_config,
)
from tests.support.bot_process import free_port, running_bot
from tests.support.cluster import sbatch, scancel_everything, squeue_json, wait_for, wait_until
from tests.support.slack_standin import SlackStandIn, signed_slash_command

pytestmark = pytest.mark.cluster

TEAM, ALICE = "T0STANDIN", "UALICE"
SECRET = "commands-over-slack"


@dataclass
class Cluster:
    running: int
    waiting: int


@pytest.fixture(scope="module")
def busy_cluster(cluster: None) -> Iterator[Cluster]:
    """alice holds hoffman-lab's whole cap; bob's job waits for it. bob's is submitted once
    alice's runs: under fair-share (deploy/testcluster-lib.sh) bob's may outrank alice's, and
    submitted together it could start first and leave her 4 GPUs over the lab's cap."""
    scancel_everything()
    running = sbatch(
        "alice",
        "-p",
        "hoffman-lab",
        "-A",
        "hoffman-lab",
        "--gpus-per-node=a40:4",
        "-J",
        "big-run",
        "--wrap",
        "sleep 600",
    )
    wait_until(
        lambda: (
            {j["job_id"]: j["job_state"] for j in squeue_json()["jobs"]}.get(running) == "RUNNING"
        ),
        30,
        "alice's job to run",
    )
    waiting = sbatch(
        "bob",
        "-p",
        "hoffman-lab",
        "-A",
        "hoffman-lab",
        "--gpus=1",
        "-J",
        "small-eval",
        "--wrap",
        "sleep 600",
    )
    yield Cluster(running, waiting)
    scancel_everything()


@pytest.fixture(params=["socket", "http"])
async def ask(
    request: pytest.FixtureRequest, tmp_path: Path, busy_cluster: Cluster
) -> AsyncIterator:
    mode = request.param
    port = free_port()
    config = replace(
        load_config(None),
        slack=SlackConfig(mode=mode, http_port=port),
        slurm=SlurmConfig(poll_seconds=1),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
        identity=IdentityConfig(links={f"{TEAM}/{ALICE}": "alice"}),
    )
    async with (
        SlackStandIn() as slack,
        running_bot(config, slack, SECRET),
        aiohttp.ClientSession() as session,
    ):

        async def sky(text: str) -> str:
            if mode == "socket":
                delivery = await slack.send_slash_command(
                    command="/sky", text=text, user_id=ALICE, team_id=TEAM, timeout=10
                )
                return str(delivery.payload["text"])
            signed = signed_slash_command(
                SECRET, command="/sky", text=text, user_id=ALICE, team_id=TEAM
            )
            url = f"http://127.0.0.1:{port}/slack/events"
            async with session.post(url, data=signed.body, headers=signed.headers) as r:
                assert r.status == 200
                return str((await r.json())["text"])

        if mode == "socket":
            await slack.wait_for_socket_connection(timeout=15)

        async def polled() -> bool:
            try:
                answer = await sky("gpus hoffman-lab")
            except (aiohttp.ClientError, TimeoutError):
                return False
            return "4/4 GPUs" in answer and "small-eval" not in answer and "bob" in answer

        await wait_for(polled, 60, "the first polls in /sky gpus (and HTTP listening)", 0.3)
        yield sky


async def test_every_command_answers_from_the_real_snapshot(ask, busy_cluster: Cluster) -> None:  # type: ignore[no-untyped-def]
    running, waiting = busy_cluster.running, busy_cluster.waiting
    gpus = await ask("gpus")  # alice's own lab, from her link
    assert "*`hoffman-lab`*: 4/4 GPUs in use (at cap)" in gpus
    assert "by user: `alice` 4" in gpus
    assert f"`{waiting}` `bob` `gpu:1` (`AssocGrpGRES`)" in gpus
    jobs = await ask("jobs")
    assert str(running) in jobs and "big-run" in jobs and "a40:4" in jobs
    assert str(waiting) in await ask("jobs bob")
    free = await ask("free")
    assert "rtx_6000" in free and "2080_ti" in free
    why = await ask(f"why {waiting}")
    assert "`hoffman-lab` is using 4/4 GPUs: `alice` 4" in why
    disk = await ask("disk hoffman-lab")
    assert "/srv/hoffman-lab/flash9/alice" in disk
    df = await ask("df")
    assert "/srv/hoffman-lab/flash9" in df and "/srv/kira-lab/share4" in df
    assert "is not a skybot command" in await ask("gpu")
    assert "as of" in gpus and "as of" in disk
