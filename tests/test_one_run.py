"""`python3 -m pytest` is one plain run: every test reported by name, cluster tests one after
another on one pytest-xdist worker (their group, tests/conftest.py) while the unit tests
spread over the others, and a second run on a cluster that a first one holds stops at once
with one line saying why (tests/support/cluster_locks.py).

The runs here are `--setup-plan` runs (nothing is set up or called, so no cluster is
touched) against locks in a folder of their own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import wait_until
from tests.support.cluster_locks import ClusterBusy, hold

REPO = Path(__file__).resolve().parent.parent
UNIT_FILE = "tests/test_why.py"
CLUSTER_FILES = ("tests/test_cluster_is_real.py", "tests/test_runner_tail_cluster.py")
CLUSTER_CASES = ("tests.test_cluster_is_real::", "tests.test_runner_tail_cluster::")


def plain_run(locks: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python3 -m pytest ARGS` as a person types it, pyproject's options and all; not as a
    worker of this suite (no PYTEST_ variable), and with its cluster locks in `locks`."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    environment["SKYBOT_TEST_LOCK_DIR"] = str(locks)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--setup-plan", *args],
        cwd=REPO, env=environment, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_every_test_is_reported_by_name_and_cluster_tests_are_one_group(
    tmp_path: Path,
) -> None:
    junit = tmp_path / "junit.xml"
    run = plain_run(tmp_path, "-v", f"--junitxml={junit}", UNIT_FILE, *CLUSTER_FILES)
    assert run.returncode in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), (
        run.stdout + run.stderr
    )
    # pytest-xdist's own scheduling: one group runs on one worker, one test after another.
    assert "2 workers [" in run.stdout, run.stdout
    assert "scheduling tests via LoadGroupScheduling" in run.stdout, run.stdout
    cases = [
        f"{case.get('classname')}::{case.get('name')}"
        for case in ET.parse(junit).getroot().iter("testcase")
    ]
    units = [case for case in cases if case.startswith("tests.test_why::")]
    cluster = [case for case in cases if case.startswith(CLUSTER_CASES)]
    assert len(units) >= 10, cases  # each unit test by name, not one for them all
    assert len(cluster) >= 5, cases
    assert len(units) + len(cluster) == len(cases), cases
    assert all(case.endswith("@cluster") for case in cluster), cases
    assert not any("@" in case for case in units), cases


@pytest.fixture
def held_by_another_run(tmp_path: Path) -> Iterator[Path]:
    """The host cluster's lock in `tmp_path`, held by a process that is no ancestor of the
    runs started here, as another `python3 -m pytest` would hold it."""
    lock = tmp_path / "skybot-cluster.lock"
    holder = subprocess.Popen(["flock", str(lock), "sleep", "120"])
    try:
        wait_until(lambda: not _free(lock), 10, "flock to take the lock", 0.05)
        yield tmp_path
    finally:
        holder.kill()
        holder.wait()


def _free(lock: Path) -> bool:
    if not lock.exists():
        return True
    try:
        held = hold(lock, "the lock")
    except ClusterBusy:
        return False
    assert held is not None
    held.close()
    return True


def test_a_second_run_on_a_held_cluster_stops_with_one_line(held_by_another_run: Path) -> None:
    started = time.monotonic()
    run = plain_run(held_by_another_run, *CLUSTER_FILES)
    assert run.returncode not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
    assert time.monotonic() - started < 60  # it did not wait for the other run
    lock = held_by_another_run / "skybot-cluster.lock"
    reason = (
        re.escape("the Slurm test cluster is in use by another test run (pid ")
        + r"\d+"
        + re.escape(f", `flock {lock} sleep 120` holds {lock}); wait for it, or queue behind")
    )
    assert re.search(f"^! .*Interrupted: {reason}", run.stdout, re.M), run.stdout
    assert re.search(f"^{reason}", run.stdout, re.M), run.stdout  # the test that stopped
    # One test stopped on it, and no other ran.
    assert re.search(r"^=+ 1 error in ", run.stdout, re.M), run.stdout


def test_a_run_queued_under_flock_goes_on_under_that_lock(tmp_path: Path) -> None:
    # `flock -o LOCK python3 -m pytest …` waits for LOCK, then runs pytest holding it.
    lock = tmp_path / "skybot-cluster.lock"
    script = "from tests.support.cluster_locks import HOST_LOCK, hold; print(hold(HOST_LOCK, 'x'))"
    queued = subprocess.run(
        ["flock", "-o", str(lock), sys.executable, "-c", script],
        cwd=REPO, env={**os.environ, "SKYBOT_TEST_LOCK_DIR": str(tmp_path)},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert queued.stdout.strip() == "None", queued.stdout + queued.stderr  # held above it


def test_ci_runs_the_readme_test_command() -> None:
    """.ci/run runs the test command that the README gives, to the letter."""
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    command = ci[ci.index("# Exactly the README's test command.") + 1].strip()
    readme = (REPO / "README.md").read_text()
    assert f"\n{command}\n" in readme, command
