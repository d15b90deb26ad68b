"""A part of skybot that serves one cluster cannot be built without its cluster (issue 38).

The pollers, watchers and submission worker take their ClusterConfig and the sections every
cluster shares (core/shared_config.py). Before, they took a whole Config, rewritten per cluster
(`polled_config`), whose `slurm`, `labs` and `default_cluster` meant "this cluster" there and
"the first cluster" everywhere else. mypy now refuses both mistakes: a part built from a Config
alone, and a part reading the first cluster's settings off the shared sections.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

SNIPPET = """\
from core.config_schema import Config
from core.runner_contract import RunnerCall
from core.shared_config import SharedConfig
from scheduler.slurm.poller import SlurmPoller
from scheduler.storage_poller import StoragePoller
from scheduler.submit_worker import SubmissionWorker
from scheduler.watchers import Watchers
from scheduler.watchers.directory import SlackDirectory
from store.writer import StoreWriter


def built(config: Config, writer: StoreWriter, ids: SlackDirectory, runner: RunnerCall) -> None:
    SlurmPoller(config.default_cluster, config, writer)
    SlurmPoller(config, config, writer)  # line 14: a Config for the cluster
    StoragePoller(config, config, writer)  # line 15
    Watchers(config, config, writer, ids)  # line 16
    SubmissionWorker(config, config, writer, runner)  # line 17


def mine(shared: SharedConfig) -> object:
    return shared.slurm, shared.labs, shared.default_cluster  # line 21: the first cluster's
"""


@pytest.mark.timeout(300)
def test_mypy_refuses_a_per_cluster_part_without_its_cluster(tmp_path: Path) -> None:
    # mypy's cache keys a module by its name and may answer for an earlier run's file of the
    # same name and content, with that file's path: each run's snippet has a name of its own.
    snippet = tmp_path / f"snippet_{uuid.uuid4().hex}.py"
    snippet.write_text(SNIPPET)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", str(snippet)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = re.findall(rf"{re.escape(str(snippet))}:(\d+): error: (.*)", result.stdout)
    assert {int(line) for line, _ in errors} == {14, 15, 16, 17, 21}, result.stdout
    wrong_cluster = 'has incompatible type "Config"; expected "ClusterConfig"'
    assert sum(wrong_cluster in error for _, error in errors) == 4, result.stdout
    first_clusters = [e for line, e in errors if line == "21"]
    assert [e.split('"')[3] for e in first_clusters] == ["slurm", "labs", "default_cluster"]
