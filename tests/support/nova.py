"""The 24.11 test cluster ("nova", deploy/testcluster-24.11.sh) driven from the host: commands
inside its sandbox as root or as a test user, its slurmrestd socket and token, and its queue
emptied around a test (the `nova_queue` fixture: import it into the test module that uses it)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.bot_process import SLACK_IDS
from tests.support.cluster_locks import LANE_LOCK, holding

REPO = Path(__file__).resolve().parents[2]
SANDBOX = REPO / "deploy" / "testcluster-24.11.sh"
SOCKET = "unix:/run/skybot-slurmrestd/24.11/slurmrestd.sock"
TOKEN = "/etc/skybot/slurm-24.11.jwt"
USERS = tuple(SLACK_IDS)


def nova(*command: str, timeout: float = 120) -> str:
    """`command` inside the 24.11 sandbox, as root."""
    done = subprocess.run(
        [str(SANDBOX), "run", *command], capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
    return done.stdout


def nova_sbatch(user: str, *args: str) -> int:
    out = nova("runuser", "-u", user, "--", "sbatch", "--parsable", "--chdir=/tmp", *args)
    return int(out.strip().split(";")[0])


def nova_state(job_id: int) -> str | None:
    out = nova("squeue", "--noheader", "--jobs", str(job_id), "--format=%T", timeout=60)
    return out.strip() or None


@pytest.fixture
def nova_queue() -> Iterator[None]:
    """24.11's queue empty before and after, and its controller running after; the sandbox
    held under the 24.11 lane's lock meanwhile, so no lane runs in it."""
    with holding(LANE_LOCK, "the Slurm 24.11 test cluster"):
        yield from _emptied_nova_queue()


def _emptied_nova_queue() -> Iterator[None]:
    for user in USERS:
        nova("scancel", f"--user={user}")
    yield
    nova(str(SANDBOX), "up", timeout=300)
    for user in USERS:
        nova("scancel", f"--user={user}")
