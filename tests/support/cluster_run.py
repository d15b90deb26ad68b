"""What a test run holds and starts once its first cluster test is about to run.

All tests marked `cluster` are one pytest-xdist group (`--dist loadgroup`, pyproject's
addopts), so they run one after another in one process, and that process does this, before
the first one's fixtures:

* takes the host cluster's lock (tests/support/cluster_locks.py), unless the run's only cluster test
  is the 24.11 lane's; when another run holds it, the run stops with one line saying so;
* starts the Slurm 24.11 lane in the background (tests/support/lane_2411.py), when the run selected
  its test: it runs beside the host's tests and its test, ordered after them, waits for it;
* starts the wheel builds that the install and upgrade tests need (tests/support/wheels.py).

Everything is released when the session ends. Inside the 24.11 sandbox (the lane's own run)
none of it happens: the lane's lock, held outside, covers it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import IO

import pytest

from tests.support import wheels
from tests.support.cluster_locks import HOST_LOCK, ClusterBusy, hold
from tests.support.lane_2411 import LANE_TEST, Lane


@dataclass
class ClusterRun:
    lock: IO[str] | None
    lane: Lane | None


KEY = pytest.StashKey[ClusterRun]()


def before_cluster_test(item: pytest.Item) -> None:
    """Called before every cluster test's setup: the first one begins the cluster run."""
    session = item.session
    if "SKYBOT_TESTCLUSTER" in os.environ or KEY in session.config.stash:
        return
    items = session.items
    host_tests = any(is_cluster(i) and not i.nodeid.startswith(LANE_TEST) for i in items)
    try:
        lock = hold(HOST_LOCK, "the Slurm test cluster") if host_tests else None
    except ClusterBusy as busy:
        session.shouldstop = str(busy)  # this test fails with it, and the run stops there
        lock, refused = None, str(busy)
    else:
        refused = ""
    if refused:
        pytest.fail(refused, pytrace=False)
    wants_lane = any(i.nodeid.startswith(LANE_TEST) for i in items)
    session.config.stash[KEY] = ClusterRun(lock, Lane.start() if wants_lane else None)
    wheels.start_for(items)


def lane(config: pytest.Config) -> Lane:
    """The 24.11 lane this run started (the lane's test is a cluster test: it began the run
    if nothing before it did)."""
    run = config.stash.get(KEY, None)
    assert run is not None and run.lane is not None, "the lane starts before its test"
    return run.lane


def end(config: pytest.Config) -> None:
    """At the session's end, however it ended: no lane outlives it, and the lock is freed."""
    run = config.stash.get(KEY, None)
    if run is not None:
        if run.lane is not None:
            run.lane.close()
        if run.lock is not None:
            run.lock.close()
        del config.stash[KEY]
    wheels.clean_up()


def is_cluster(item: pytest.Item) -> bool:
    return item.get_closest_marker("cluster") is not None
