"""What a site reads before anything goes wrong: the start-up line says which skybot, schema and
clusters run; `check-config` counts clusters and labs (it counted the top-level labs only, so a
[[clusters]] file said "0 labs"); and `skybot show manifest` follows `slack.mode` (in HTTP mode
it printed the Socket Mode manifest without a word). Issue 42."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from bot import __version__
from bot.config import load_config
from bot.startup import claimed
from store.db import SCHEMA_VERSION

REPO = Path(__file__).resolve().parent.parent

TWO_CLUSTERS_FOUR_LABS = """
[database]
path = "{database}"
[metrics]
port = 0
[[clusters]]
name = "skynet"
[[clusters.labs]]
name = "hoffman-lab"
partition = "hoffman-lab"
account = "hoffman-lab"
[[clusters.labs]]
name = "kira-lab"
partition = "kira-lab"
account = "kira-lab"
[[clusters.labs]]
name = "lee-lab"
partition = "lee-lab"
account = "lee-lab"

[[clusters]]
name = "nova"
[[clusters.labs]]
name = "moss-lab"
partition = "moss"
account = "moss-lab"
"""


def skybot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.fixture
def two_clusters(tmp_path: Path) -> Path:
    config = tmp_path / "skybot.toml"
    config.write_text(TWO_CLUSTERS_FOUR_LABS.format(database=tmp_path / "skybot.db"))
    return config


def test_check_config_counts_clusters_and_labs(two_clusters: Path) -> None:
    result = skybot("check-config", "--config", str(two_clusters))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("config OK: 2 clusters, 4 labs, database "), result.stdout


def test_check_config_of_a_one_cluster_file(tmp_path: Path) -> None:
    config = tmp_path / "skybot.toml"
    config.write_text('[[labs]]\nname = "a"\npartition = "a"\naccount = "a"\n')
    result = skybot("check-config", "--config", str(config))
    assert result.stdout.startswith("config OK: 1 cluster, 1 lab, database "), result.stdout


def test_the_start_up_line_says_version_schema_and_clusters(
    two_clusters: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="skybot"), claimed(load_config(two_clusters)):
        pass
    lines = [r.getMessage() for r in caplog.records if "starting" in r.getMessage()]
    assert lines == [
        f"skybot {__version__} starting: database schema {SCHEMA_VERSION} "
        f"({two_clusters.parent / 'skybot.db'}), clusters: skynet (3 labs), nova (1 lab)"
    ]


def test_the_manifest_of_an_http_config_is_not_socket_mode(tmp_path: Path) -> None:
    config = tmp_path / "skybot.toml"
    config.write_text('[slack]\nmode = "http"\n')
    result = skybot("show", "manifest", "--config", str(config))
    assert result.returncode == 2
    assert "socket_mode_enabled: true" not in result.stdout
    (line,) = result.stderr.strip().splitlines()
    assert 'slack.mode = "http"' in line and "--http-url https://HOST/slack/events" in line
    url = "https://skybot.example.org/slack/events"
    http = skybot("show", "manifest", "--config", str(config), "--http-url", url)
    assert http.returncode == 0, http.stderr
    assert "socket_mode_enabled: false" in http.stdout and f"url: {url}" in http.stdout


def test_the_manifest_of_a_socket_config_stays_socket_mode(tmp_path: Path) -> None:
    config = tmp_path / "skybot.toml"
    config.write_text('[slack]\nmode = "socket"\n')
    result = skybot("show", "manifest", "--config", str(config))
    assert result.returncode == 0 and "socket_mode_enabled: true" in result.stdout
