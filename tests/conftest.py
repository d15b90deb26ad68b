from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression

from store.writer import StoreWriter
from tests import wheels
from tests.bytecode_cache import cache_bytecode_outside_the_tree
from tests.cluster import scancel_everything, slurm_answers
from tests.empty_database import empty_database
from tests.lane_2411 import LANE_KEY, LANE_TEST, Lane
from tests.unit_lane import UNIT_LANE_KEY, UNIT_LANE_TEST, start_unit_lane

# Seconds a cluster test may take (setup to teardown) before pytest-timeout fails it: jobs
# queue, run and reach accounting in real time. Unit tests get the ini's `timeout`.
CLUSTER_TIMEOUT = 900


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected what they deselect
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    refuse_cluster_tests_in_parallel(items, os.environ.get("PYTEST_XDIST_WORKER"))
    for item in items:
        if item.get_closest_marker("cluster") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(CLUSTER_TIMEOUT))
    start_the_unit_lane(config, items)
    start_the_24_11_lane(config, items)
    if not config.option.collectonly and "SKYBOT_TESTCLUSTER" not in os.environ:
        wheels.start_for(items)


# Cluster tests cancel every test user's jobs and restart shared daemons: two at once break
# each other. Under pytest-xdist (`-n`, for the fast lane) each worker would run some, and
# start the 24.11 lane besides.
PARALLEL_CLUSTER_TESTS = 'tests marked cluster never run in parallel: with -n, add -m "not cluster"'


def pytest_configure(config: pytest.Config) -> None:
    cache_bytecode_outside_the_tree()  # before xdist starts its workers with this environment
    workers = config.getoption("numprocesses", None)
    in_a_worker = "PYTEST_XDIST_WORKER" in os.environ  # the controller decided already
    if not in_a_worker and parallel_run_may_select_cluster_tests(workers, config.option.markexpr):
        raise pytest.UsageError(PARALLEL_CLUSTER_TESTS)


def parallel_run_may_select_cluster_tests(workers: object, markexpr: str) -> bool:
    """`-n` given, and the -m expression lets a test marked cluster through, whatever other
    markers it has (the workers' collection is not seen here: this is decided beforehand)."""
    if not workers:
        return False
    if not markexpr:
        return True
    expression = Expression.compile(markexpr)
    return any(
        expression.evaluate(lambda name, o=others: name == "cluster" or o)
        for others in (False, True)
    )


def refuse_cluster_tests_in_parallel(items: Sequence[pytest.Item], worker: str | None) -> None:
    """In a worker, the same rule again over what it collected: it can only fail the run."""
    if worker is not None and any(item.get_closest_marker("cluster") for item in items):
        raise pytest.UsageError(PARALLEL_CLUSTER_TESTS)


def start_the_unit_lane(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a run of cluster and unit tests alike, hand the unit tests to a background pytest
    (tests/unit_lane.py) and collect its test after the host's cluster tests.

    Only for a run selected by paths alone: with -k or -m the unit tests run here, as the
    expression says, and the lane's test is dropped."""
    lane_tests = [item for item in items if item.nodeid.startswith(UNIT_LANE_TEST)]
    if not lane_tests:
        return
    units = [item for item in items if not item.get_closest_marker("cluster")]
    others = [item for item in items if item not in lane_tests and item not in units]
    beside = (
        units
        and others
        and not config.option.collectonly
        and not config.option.markexpr
        and not config.option.keyword
        and "SKYBOT_TESTCLUSTER" not in os.environ
        and "PYTEST_XDIST_WORKER" not in os.environ
    )
    config.hook.pytest_deselected(items=units if beside else lane_tests)
    if not beside:
        items[:] = [item for item in items if item not in lane_tests]
        return
    items[:] = others + lane_tests
    config.stash[UNIT_LANE_KEY] = start_unit_lane(config.args, config.invocation_params.dir)


def start_the_24_11_lane(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the Slurm 24.11 lane now, beside the host's tests, and collect its test last.

    The two clusters share nothing, and most of a cluster test is waiting on Slurm, so the
    lane running meanwhile takes CI from the sum of both suites to about the longer one."""
    lane_tests = [item for item in items if item.nodeid.startswith(LANE_TEST)]
    alone = len(lane_tests) == len(items)
    if not lane_tests or alone or config.option.collectonly or "SKYBOT_TESTCLUSTER" in os.environ:
        return
    # Tests that drive the sandbox from the host (its jobs, its controller) would pull the
    # ground from under the lane: they run after it, when its test has waited for it.
    both = [item for item in items if item.get_closest_marker("both_clusters")]
    rest = [item for item in items if item not in lane_tests and item not in both]
    items[:] = rest + lane_tests + both
    config.stash[LANE_KEY] = Lane.start()


def pytest_unconfigure(config: pytest.Config) -> None:
    # A session that ended before a lane's test: no lane outlives it.
    lane = config.stash.get(LANE_KEY, None)
    if lane is not None:
        lane.close()
    unit_lane = config.stash.get(UNIT_LANE_KEY, None)
    if unit_lane is not None:
        unit_lane.close()
    wheels.clean_up()


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
