"""The fast lane may run on several pytest-xdist workers (`-n`); tests marked cluster never
do: they share one Slurm cluster, its test users' jobs and its daemons."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PARALLEL_CLUSTER_TESTS, parallel_run_may_select_cluster_tests

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("workers", "markexpr", "refused"),
    [
        (4, "not cluster", False),
        (4, "not cluster and not slow", False),
        ("auto", "not (cluster or both_clusters)", False),
        (4, "", True),
        (4, "cluster", True),
        (4, "not both_clusters", True),  # a cluster test without both_clusters gets through
        (4, "cluster and both_clusters", True),
        (4, "not cluster or both_clusters", True),
        (0, "", False),  # -n 0: no workers
        (None, "", False),  # no -n, or no pytest-xdist
    ],
)
def test_only_a_run_without_cluster_tests_may_be_parallel(
    workers: object, markexpr: str, refused: bool
) -> None:
    assert parallel_run_may_select_cluster_tests(workers, markexpr) is refused


def test_pytest_refuses_cluster_tests_with_n_before_anything_runs() -> None:
    # A cluster test file, only collected: were the rule broken, nothing would run either.
    # Run from a worker of this suite, pytest must not think itself one.
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "--collect-only",
         "tests/test_runner.py"],
        cwd=REPO, env=environment, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert PARALLEL_CLUSTER_TESTS in result.stderr
    assert "bringing up nodes" not in result.stdout
