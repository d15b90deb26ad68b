"""`skybot poll`, `skybot console` and `skybot doctor` read every cluster through its own source
(issue 38), on the two real test clusters: 22.05 ("skynet") through its commands, 24.11
("nova") through its slurmrestd socket. Before, the console and `skybot poll` polled only the
default cluster, through this host's commands whatever its source (a slurmrestd-only config
got the host cluster's jobs), the console ignored `--cluster`, and the doctor checked only the
default cluster's commands.

Takes both clusters' locks when run as the brief says:
flock -o /tmp/skybot-cluster.lock flock -o /tmp/skybot-cluster-24.11.lock python3 -m pytest …
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlite_utils

from store.snapshots import load_snapshot
from tests.support.cluster import sbatch
from tests.support.nova import SOCKET, TOKEN, nova_queue, nova_sbatch

__all__ = ["nova_queue"]  # a fixture, used by name

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.both_clusters,
    pytest.mark.skipif(
        "SKYBOT_TESTCLUSTER" in os.environ, reason="drives both clusters from the host"
    ),
]

LAB = 'name = "{0}"\npartition = "{0}"\naccount = "{0}"\n'
NOVA = (
    f'[[clusters]]\nname = "nova"\nsource = "slurmrestd"\nurl = "{SOCKET}"\n'
    f'token_file = "{TOKEN}"\n[[clusters.labs]]\n{LAB.format("kira-lab")}'
)
SKYNET = f'[[clusters]]\nname = "skynet"\n[[clusters.labs]]\n{LAB.format("hoffman-lab")}'


def config_file(tmp_path: Path, *clusters: str) -> Path:
    path = tmp_path / "skybot.toml"
    path.write_text(f'[database]\npath = "{tmp_path}/skybot.db"\n' + "".join(clusters))
    return path


def skybot(*args: str, typed: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        input=typed,
        capture_output=True,
        text=True,
        timeout=120,
    )


def job_names(database: Path, cluster: str) -> set[str]:
    connection = sqlite3.connect(database)
    try:
        jobs = load_snapshot(sqlite_utils.Database(connection), cluster).jobs
    finally:
        connection.close()
    return {job.name for job in jobs}


@pytest.fixture
def held_jobs(clean_queue: None, nova_queue: None) -> None:
    """A held job on each cluster, told apart by name."""
    sbatch("alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "--hold", "-J", "on-skynet",
           "--wrap", "true")  # fmt: skip
    nova_sbatch("dave", "-p", "kira-lab", "-A", "kira-lab", "--hold", "-J", "on-nova",
                "--wrap", "true")  # fmt: skip


def test_poll_of_a_slurmrestd_only_config_reads_slurmrestd(tmp_path: Path, held_jobs: None) -> None:
    done = skybot("poll", "--config", str(config_file(tmp_path, NOVA)))
    assert done.returncode == 0, done.stdout + done.stderr
    # nova's own queue (other tests may have jobs of their own there), never skynet's.
    nova = job_names(tmp_path / "skybot.db", "nova")
    assert "on-nova" in nova and "on-skynet" not in nova, nova


def test_poll_console_and_doctor_go_through_each_clusters_source(
    tmp_path: Path, held_jobs: None
) -> None:
    config = str(config_file(tmp_path, SKYNET, NOVA))
    done = skybot("poll", "--config", config)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["skynet", "nova"], done.stdout
    skynet = job_names(tmp_path / "skybot.db", "skynet")
    nova = job_names(tmp_path / "skybot.db", "nova")
    assert "on-skynet" in skynet and "on-nova" not in skynet, skynet
    assert "on-nova" in nova and "on-skynet" not in nova, nova

    typed = "jobs\ngpus kira-lab\njobs --cluster skynet\ngpus --cluster orion\n"
    console = skybot("console", "--config", config, "--cluster", "nova", "--as", "dave",
                     typed=typed)  # fmt: skip
    assert console.returncode == 0, console.stderr
    answers = console.stdout.split("On cluster")
    # `jobs` is about nova (the console's cluster), `jobs --cluster skynet` about skynet.
    assert "on-nova" in answers[0] and "`nova`" in answers[1], console.stdout
    assert "kira-lab" in answers[1] and "`nova`" in answers[2], console.stdout
    assert "on-nova" not in answers[2] and "`skynet`" in answers[3], console.stdout
    assert "no cluster called `orion`" in console.stdout, console.stdout
    unknown = skybot("console", "--config", config, "--cluster", "orion")
    assert unknown.returncode == 2 and "no cluster called 'orion'" in unknown.stderr

    doctor = skybot("doctor", "--config", config)
    out = doctor.stdout
    assert "✔ slurmrestd token on nova: a token for" in out, out
    assert "✔ slurmrestd on nova: unix:" in out, out
    assert "✔ slurmrestd nodes on nova: " in out, out
    assert "✔ slurmrestd associations on nova: " in out, out
    assert "✔ slurm on skynet: squeue --json answered" in out, out
