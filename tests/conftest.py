from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster import scancel_everything, slurm_answers

# Seconds a cluster test may take (setup to teardown) before pytest-timeout fails it: jobs
# queue, run and reach accounting in real time. Unit tests get the ini's `timeout`.
CLUSTER_TIMEOUT = 900


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("cluster") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(CLUSTER_TIMEOUT))


@pytest.fixture(scope="session")
def cluster() -> Iterator[None]:
    """The real Slurm test cluster. It must be up: its absence is a failure, not a skip."""
    if not slurm_answers():
        pytest.fail("the Slurm test cluster is not answering: run `deploy/testcluster.sh up`")
    scancel_everything()
    yield
    scancel_everything()


@pytest.fixture
def clean_queue(cluster: None) -> Iterator[None]:
    """Each cluster test starts and ends with an empty queue, so tests cannot see each other."""
    scancel_everything()
    yield
    scancel_everything()


@pytest.fixture(scope="session")
def checkout_runner(cluster: None) -> None:
    """The runner and sudoers rule from this checkout, as `skybot install` puts them: the bot
    sends its version with every request, and a runner of another version refuses it."""
    script = Path(__file__).resolve().parent.parent / "deploy" / "install-runner.sh"
    result = subprocess.run([str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
