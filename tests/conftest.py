from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.writer import StoreWriter
from tests.support import cluster_run
from tests.support.bytecode_cache import cache_bytecode_outside_the_tree
from tests.support.cluster import scancel_everything, slurm_answers
from tests.support.empty_database import empty_database
from tests.support.lane_2411 import LANE_TEST

# Seconds a cluster test may take (setup to teardown) before pytest-timeout fails it: jobs
# queue, run and reach accounting in real time. Unit tests get the ini's `timeout`.
CLUSTER_TIMEOUT = 900
# Every test marked cluster is in this pytest-xdist group. With `--dist loadgroup` (pyproject's
# addopts) the group runs on one worker, one test after another: cluster tests share one
# Slurm cluster, its test users' jobs and its daemons. Unit tests spread over the workers.
CLUSTER_GROUP = "cluster"


def pytest_configure(config: pytest.Config) -> None:
    cache_bytecode_outside_the_tree()  # before xdist starts its workers with this environment


def pytest_itemcollected(item: pytest.Item) -> None:
    # Here, before pytest-xdist's own pass over the items reads the group.
    if item.get_closest_marker("cluster"):
        item.add_marker(pytest.mark.xdist_group(CLUSTER_GROUP))
        if not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(CLUSTER_TIMEOUT))


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected what they deselect
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The 24.11 lane's test after the host's cluster tests: its lane runs beside them
    (tests/support/cluster_run.py). Tests that drive the sandbox from the host (its jobs, its
    controller) would pull the ground from under the lane: they run after its test."""
    lane = [item for item in items if item.nodeid.startswith(LANE_TEST)]
    both = [item for item in items if item.get_closest_marker("both_clusters")]
    if lane or both:
        last = lane + both
        items[:] = [item for item in items if item not in last] + last


# Tests of skybot's own exactly-once machinery (crashes, restarts, the outbox, the runner's
# hand-off), for which Slurm only supplies jobs that end: proven once, in the 24.11 lane.
# On the host they would lengthen CI's longest path (the host's cluster tests) by 2 min.
LANE_ONLY = (
    "skybot's own delivery across crashes, with Slurm only supplying jobs: run once, in the "
    "Slurm 24.11 lane (tests/test_slurm_24_11_lane.py)"
)


@pytest.hookimpl(tryfirst=True)  # before the test's fixtures: they may touch the cluster
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("lane_only") and "SKYBOT_TESTCLUSTER" not in os.environ:
        pytest.skip(LANE_ONLY)
    if cluster_run.is_cluster(item):
        cluster_run.before_cluster_test(item)


@pytest.hookimpl(trylast=True)  # after the session's fixtures are torn down
def pytest_sessionfinish(session: pytest.Session) -> None:
    cluster_run.end(session.config)


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[StoreWriter]:
    """A store in the test's own directory, written to on its own thread."""
    w = StoreWriter(empty_database(tmp_path / "skybot.db"))
    yield w
    w.close()


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
