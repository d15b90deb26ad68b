"""The slurmrestd client against the real daemons: 22.05's on this host (TCP and its unix
socket), and, in the 24.11 cluster lane, 24.11's inside the sandbox (through the socket
directory deploy/testcluster-24.11.sh bind-mounts at the same path on the host). The documents
must parse into the same records as the CLI path's for the same jobs and nodes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from core.records import Job, Node
from core.slurm_json import parse_sacct, parse_sinfo, parse_squeue
from scheduler.slurm.restd import RestdClient, RestdError
from tests.support.cluster import cluster_script, sbatch, wait_for, wait_until
from tests.support.restd_daemon import INSIDE_2411, SOCKET, TOKEN, mint

pytestmark = pytest.mark.cluster

ADDRESSES = [SOCKET] if INSIDE_2411 else ["http://127.0.0.1:6820", SOCKET]


@pytest.fixture(scope="module")
def restd_cluster(cluster: None) -> Iterator[None]:
    # An `up` from a checkout older than slurmrestd's set-up writes slurm.conf without JWT;
    # this one's puts it back (and starts slurmrestd if it is not running).
    cluster_script("up")
    yield


@pytest.fixture
async def client(restd_cluster: None) -> AsyncIterator[RestdClient]:
    async with RestdClient(SOCKET, TOKEN, timeout=20) as restd:
        yield restd


def slurm_json(*command: str) -> dict[str, Any]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def cli_nodes() -> list[Node]:
    # What the CLI poller reads: 22.05's sinfo lists nodes one by one, 23.02+'s groups them.
    command = ("scontrol", "show", "nodes", "--json") if INSIDE_2411 else ("sinfo", "--json")
    return sorted(parse_sinfo(slurm_json(*command)).records, key=lambda n: n.name)


def by_id(jobs: list[Job], ids: set[int]) -> dict[int, Job]:
    return {job.job_id: job for job in jobs if job.job_id in ids}


def cli_jobs(ids: set[int]) -> dict[int, Job]:
    return by_id(parse_squeue(slurm_json("squeue", "--all", "--json")).records, ids)


@pytest.mark.parametrize("address", ADDRESSES)
async def test_jobs_and_nodes_read_as_the_cli_reads_them(
    restd_cluster: None, clean_queue: None, address: str
) -> None:
    held = {
        sbatch("alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "--gpus-per-node=a40:1",
               "--hold", "-J", "held a40", "--wrap", "true"),
        sbatch("carol", "-p", "kira-lab", "-A", "kira-lab", "--gres=gpu:1", "--hold",
               "--wrap", "true"),
    }  # fmt: skip
    running = sbatch("bob", "-p", "hoffman-lab", "-A", "hoffman-lab", "--gpus=2", "--wrap",
                     "sleep 300")  # fmt: skip
    ids = held | {running}
    wait_until(
        lambda: getattr(cli_jobs({running}).get(running), "state", None) == "RUNNING",
        timeout=30,
        what="bob's job to run",
    )
    async with RestdClient(address, TOKEN, timeout=20) as restd:
        assert await restd.version() == ("v0.0.42" if INSIDE_2411 else "v0.0.38")
        rest_jobs = await restd.jobs()
        rest_nodes = await restd.nodes()
    cli = cli_jobs(ids)
    assert rest_jobs.document is not None and rest_nodes.document is not None
    rest = by_id(parse_squeue(rest_jobs.document).records, ids)
    assert len(rest) == 3
    assert rest == cli
    nodes = sorted(parse_sinfo(rest_nodes.document).records, key=lambda n: n.name)
    assert nodes == cli_nodes()


async def test_job_states_read_as_squeue_only_job_state_reads_them(
    client: RestdClient, clean_queue: None
) -> None:
    if not INSIDE_2411:
        pytest.skip("22.05 has no states-only read (24.05+)")
    ids = {
        sbatch("alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "--hold", "--wrap", "true"),
        sbatch("dave", "-p", "kira-lab", "-A", "kira-lab", "--wrap", "sleep 300"),
    }

    def states(document: dict[str, Any]) -> dict[str, list[str]]:
        return {j["job_id"]: j["state"] for j in document["jobs"] if int(j["job_id"]) in ids}

    wait_until(lambda: "RUNNING" in str(cli_jobs(ids)), timeout=30, what="dave's job to run")
    rest = states(await client.job_states())
    assert rest == states(slurm_json("squeue", "--all", "--only-job-state", "--json"))
    assert sorted(rest.values()) == [["PENDING"], ["RUNNING"]]


async def test_ended_jobs_read_from_accounting_as_sacct_reads_them(
    client: RestdClient, clean_queue: None
) -> None:
    start = time.time() - 5
    done = sbatch("dave", "-p", "kira-lab", "-A", "kira-lab", "--gres=gpu:1", "--wrap", "true")
    window = ["--allusers", f"--starttime=now-{int(time.time() - start) + 60}", "--json"]

    def sacct_job() -> Job | None:
        return by_id(parse_sacct(slurm_json("sacct", *window)).records, {done}).get(done)

    wait_until(lambda: (job := sacct_job()) is not None and job.state == "COMPLETED", timeout=60,
               what="dave's job in sacct")  # fmt: skip
    document = await client.accounting_jobs(start - 60, time.time() + 60)
    rest = by_id(parse_sacct(document).records, {done})
    assert rest == {done: sacct_job()}


async def test_an_unchanged_queue_costs_a_no_change_answer(
    client: RestdClient, clean_queue: None
) -> None:
    sbatch("alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "--hold", "--wrap", "true")
    await asyncio.sleep(2)  # past the submission's second
    read = await client.jobs()
    assert read.document is not None

    # The controller may touch its queue on a scheduling pass; a quiet second soon comes.
    async def quiet_second() -> Any:
        nonlocal read
        again = await client.jobs(read.update_time)
        if again.document is None:
            return again
        read = again
        return None

    await asyncio.sleep(1.1)
    unchanged = await wait_for(quiet_second, 4, "a 'no change' answer in 5 quiet seconds", 1.1)
    assert unchanged.update_time == read.update_time
    # And a change is not missed: the next read with the same update_time has the new job.
    new = sbatch("carol", "-p", "kira-lab", "-A", "kira-lab", "--hold", "--wrap", "true")
    changed = await client.jobs(read.update_time)
    assert changed.document is not None
    assert new in {job.job_id for job in parse_squeue(changed.document).records}
    nodes = await client.nodes()
    await asyncio.sleep(1.1)
    assert (await client.nodes(nodes.update_time)).document is None


async def test_a_rotated_token_is_picked_up(restd_cluster: None, tmp_path: Path) -> None:
    token = tmp_path / "skybot.jwt"
    mint(token, 600)
    good = token.read_text()
    async with RestdClient(SOCKET, token, timeout=20) as restd:
        assert (await restd.nodes()).document is not None
        # A token slurmctld cannot verify: what a token minted with another key looks like.
        token.write_text(good.strip() + "x\n")
        with pytest.raises(RestdError, match=rf"token in {token}"):
            await restd.jobs()
        # Another lifespan: a token minted in the same second with the same one is the same.
        mint(token, 900)
        assert token.read_text() != good
        assert (await restd.nodes()).document is not None


async def test_a_stopped_slurmrestd_is_a_clear_error_and_recovers(client: RestdClient) -> None:
    await client.nodes()
    cluster_script("stop-restd")
    try:
        with pytest.raises(RestdError, match=f"cannot connect to slurmrestd at {SOCKET}"):
            await client.nodes()
    finally:
        cluster_script("up")
    assert (await client.nodes()).document is not None
