"""The 24.11 cluster's slurmrestd read from the host, through the socket directory
deploy/testcluster-24.11.sh bind-mounts at the same path inside its sandbox: one host process
can read both test clusters. Reads only, yet not beside the 24.11 lane: the lane's outage tests
pause and stop that cluster's controller, and slurmrestd then answers 504 (seen in a full run).
So it runs after the lane, under the lane's lock, as every test that reaches into the sandbox
does. The full comparison with the CLI runs inside the lane (tests/test_restd_cluster.py)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.slurm_json import parse_sinfo, parse_squeue
from scheduler.slurm.restd import RestdClient
from tests.support.cluster_locks import LANE_LOCK, holding

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.both_clusters,
    pytest.mark.skipif(
        Path("/etc/skybot-testcluster-24.11").exists(),
        reason="inside the sandbox: tests/test_restd_cluster.py reads this cluster there",
    ),
]

REPO = Path(__file__).resolve().parent.parent
SOCKET = "unix:/run/skybot-slurmrestd/24.11/slurmrestd.sock"
TOKEN = Path("/etc/skybot/slurm-24.11.jwt")


def sandbox_nodes() -> dict[str, dict[str, int]]:
    result = subprocess.run(
        [
            str(REPO / "deploy" / "testcluster-24.11.sh"),
            "run",
            "scontrol",
            "show",
            "nodes",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return {n.name: n.gpus_total for n in parse_sinfo(json.loads(result.stdout)).records}


@pytest.fixture
def the_lane_is_not_running() -> Iterator[None]:
    with holding(LANE_LOCK, "the Slurm 24.11 test cluster"):
        yield


async def test_the_2411_cluster_is_read_from_the_host(the_lane_is_not_running: None) -> None:
    if not Path(SOCKET.removeprefix("unix:")).is_socket():
        pytest.fail("no 24.11 slurmrestd socket on the host: run deploy/testcluster-24.11.sh up")
    async with RestdClient(SOCKET, TOKEN, timeout=20) as restd:
        assert await restd.version() == "v0.0.42"
        nodes = await restd.nodes()
        jobs = await restd.jobs()
        states = await restd.job_states()
    assert nodes.document is not None and jobs.document is not None
    # The sandbox's own five nodes, GPUs and all: not the host cluster's three.
    rest_nodes = {n.name: n.gpus_total for n in parse_sinfo(nodes.document).records}
    assert rest_nodes == sandbox_nodes()
    assert "olaf" in rest_nodes
    parsed = parse_squeue(jobs.document)
    assert not parsed.warnings
    assert isinstance(states["jobs"], list)
    # 24.11 stamps its answers with the controller's time, which the next read sends back.
    assert jobs.update_time > 1_700_000_000
