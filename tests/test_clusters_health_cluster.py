"""Storage and health per cluster on the two real test clusters (issue 38): 22.05 ("skynet",
the default) through its commands, 24.11 ("nova") through its slurmrestd socket.

- `/sky df` and `/sky disk` answer each cluster's labs from its own storage, after several
  storage polls of both (they shared one set of tables: the last poll won);
- nova failing (its slurmrestd SIGSTOPped) is named in /readyz and /metrics, skynet stays ready;
- nova's poll stuck (its poll worker SIGSTOPped) is abandoned and started again inside the
  bot: skynet stays ready and current, and the systemd watchdog stays fed throughout.

Takes both clusters' locks when run as the brief says:
flock -o /tmp/skybot-cluster.lock flock -o /tmp/skybot-cluster-24.11.lock python3 -m pytest …
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import re
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import sqlite_utils

from core.config_schema import Config, parse_config
from store.snapshots import load_source_status
from tests.support.bot_process import SLACK_IDS, TEAM, ask, free_port, linked_users, running_bot
from tests.support.cluster import wait_for
from tests.support.nova import SOCKET, TOKEN, nova_queue, nova_sbatch
from tests.support.slack_standin import SlackStandIn
from tests.support.stored_polls import source_status, stored_poll

__all__ = ["nova_queue"]  # a fixture, used by name

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.both_clusters,
    pytest.mark.skipif(
        "SKYBOT_TESTCLUSTER" in os.environ, reason="drives both clusters from the host"
    ),
]

REPORT = "Updated: 2026-11-30 03:00\nUsage (human-readable): {human}\nUsage (K): {kib}\n"


def lab(name: str, root: Path) -> dict[str, Any]:
    return {"name": name, "partition": name, "account": name, "storage_roots": [str(root)]}


def storage(root: Path, user: str, gib: int) -> Path:
    """A lab's storage root with one user's weekly report in it."""
    home = root / user
    home.mkdir(parents=True)
    (home / "disk-usage.txt").write_text(REPORT.format(human=f"{gib}G", kib=gib * 1024**2))
    return root


def config_for(tmp_path: Path, port: int, skynet_root: Path, nova_root: Path) -> Config:
    slurm = {"poll_seconds": 2, "command_timeout_seconds": 3}
    return parse_config(
        {
            "slack": {"mode": "socket"},
            "database": {"path": str(tmp_path / "skybot.db")},
            "identity": {"links": {f"{TEAM}/{sid}": user for user, sid in SLACK_IDS.items()}},
            "metrics": {"port": port, "stale_after_polls": 3},
            "storage": {"poll_seconds": 1},
            "clusters": [
                {"name": "skynet", "slurm": slurm, "labs": [lab("hoffman-lab", skynet_root)]},
                {
                    "name": "nova",
                    "source": "slurmrestd",
                    "url": SOCKET,
                    "token_file": TOKEN,
                    "slurm": slurm,
                    "labs": [lab("kira-lab", nova_root)],
                },
            ],
        }
    )


class Watchdog:
    """systemd's side of sd_notify: a datagram socket the bot's WATCHDOG=1 pings arrive on,
    each noted with its monotonic time."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.pings: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                message = self.sock.recv(4096)
            except TimeoutError:
                continue
            if b"WATCHDOG=1" in message:
                self.pings.append(time.monotonic())

    def longest_gap(self, since: float) -> float:
        times = [since, *(t for t in self.pings if t >= since), time.monotonic()]
        return max(b - a for a, b in itertools.pairwise(times))

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def watchdog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Watchdog]:
    """The bot in this process runs as if under systemd with WatchdogSec=30s."""
    dog = Watchdog(tmp_path / "notify.sock")
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify.sock"))
    monkeypatch.setenv("WATCHDOG_USEC", "30000000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    yield dog
    dog.close()


def nova_restd_pid() -> int:
    out = subprocess.run(
        ["pgrep", "-f", "slurmrestd .*unix:/run/skybot-slurmrestd/24.11/"],
        capture_output=True,
        text=True,
    ).stdout.split()
    assert len(out) == 1, f"nova's slurmrestd: {out}"
    return int(out[0])


def storage_polled(database: Path, cluster: str) -> float | None:
    try:
        connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    except sqlite3.OperationalError:
        return None
    try:
        return load_source_status(sqlite_utils.Database(connection), cluster, "storage").taken_at
    except sqlite3.OperationalError:
        return None
    finally:
        connection.close()


async def get(port: int, path: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}{path}") as response,
    ):
        return response.status, await response.text()


@dataclass
class Bot:
    slack: SlackStandIn
    port: int
    database: Path
    roots: dict[str, Path]


@pytest.fixture
async def bot(
    tmp_path: Path,
    clean_queue: None,
    nova_queue: None,
    watchdog: Watchdog,
    caplog: pytest.LogCaptureFixture,
) -> AsyncIterator[Bot]:
    """Both clusters served by one bot (metrics on), each cluster polled at least once."""
    caplog.set_level(logging.INFO, logger="scheduler.slurm.worker")  # its pid
    roots = {
        "skynet": storage(tmp_path / "flash9", "alice", 70),
        "nova": storage(tmp_path / "share4", "dave", 30),
    }
    port = free_port()
    config = config_for(tmp_path, port, roots["skynet"], roots["nova"])
    database = tmp_path / "skybot.db"
    nova_sbatch("dave", "-p", "kira-lab", "-A", "kira-lab", "--hold", "-J", "on-nova",
                "--wrap", "true")  # fmt: skip
    started = time.time()
    async with SlackStandIn(users=linked_users()) as slack, running_bot(config, slack):
        await slack.wait_for_socket_connection(timeout=20)
        for cluster in ("skynet", "nova"):
            await stored_poll(database, cluster, started)

        async def ready() -> bool:  # the Socket Mode link counted as up
            return (await get(port, "/readyz"))[0] == 200

        await wait_for(ready, 30, "/readyz to say ready", 0.2)
        yield Bot(slack, port, database, roots)


@pytest.mark.timeout(300)
async def test_df_and_disk_answer_each_clusters_labs_after_several_storage_polls(
    bot: Bot,
) -> None:
    skynet_root, nova_root = bot.roots["skynet"], bot.roots["nova"]
    for _ in range(3):
        for cluster in ("skynet", "nova"):
            since = storage_polled(bot.database, cluster) or 0.0
            await wait_for(
                lambda c=cluster, s=since: (storage_polled(bot.database, c) or 0) > s,
                30,
                f"a storage poll of {cluster}",
                interval=0.2,
            )
        df = (await ask(bot.slack, "alice", "df"))["text"]
        assert f"`{skynet_root}`" in df and str(nova_root) not in df, df
        assert "On cluster `skynet`" in df and "no lab has storage roots" not in df, df
        nova_df = (await ask(bot.slack, "dave", "df --cluster nova"))["text"]
        assert f"`{nova_root}`" in nova_df and str(skynet_root) not in nova_df, nova_df
        assert "On cluster `nova`" in nova_df, nova_df
        disk = (await ask(bot.slack, "alice", "disk hoffman-lab"))["text"]
        assert f"{skynet_root}/alice" in disk and "70G" in disk, disk
        assert "On cluster `skynet`" in disk
        nova_disk = (await ask(bot.slack, "dave", "disk kira-lab"))["text"]
        assert f"{nova_root}/dave" in nova_disk and "30G" in nova_disk, nova_disk
        assert "On cluster `nova`" in nova_disk and "alice" not in nova_disk


@pytest.mark.timeout(300)
async def test_nova_failing_is_named_in_readyz_metrics_and_logs_and_skynet_stays_ready(
    bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    port, database = bot.port, bot.database
    status, body = await get(port, "/readyz?cluster=skynet")
    assert status == 200, body
    # nova's slurmrestd stops answering.
    restd = nova_restd_pid()
    os.kill(restd, signal.SIGSTOP)
    try:
        await wait_for(lambda: source_status(database, "nova")[1], 60, "nova to fail")
        status, text = await get(port, "/readyz")
        ready = json.loads(text)
        assert status == 503 and ready["clusters"]["nova"]["ready"] is False, ready
        nova_slurm = ready["clusters"]["nova"]["checks"]["slurm"]
        # Named for the part that failed: nova is read through its slurmrestd.
        assert nova_slurm["ok"] is False and "slurmrestd" in nova_slurm["detail"], nova_slurm
        assert ready["clusters"]["skynet"]["ready"] is True, ready
        assert (await get(port, "/readyz?cluster=skynet"))[0] == 200
        assert (await get(port, "/readyz?cluster=nova"))[0] == 503
        _, metrics = await get(port, "/metrics")
        assert 'skybot_source_failing{cluster="nova",source="slurm"} 1.0' in metrics
        assert 'skybot_source_failing{cluster="skynet",source="slurm"} 0.0' in metrics
        assert 'skybot_ready{check="slurm",cluster="nova"} 0.0' in metrics
        assert 'skybot_ready{check="slurm",cluster="skynet"} 1.0' in metrics
        assert 'skybot_snapshot_age_seconds{cluster="nova",source="slurm"}' in metrics
        said = [r.getMessage() for r in caplog.records]
        failed = [m for m in said if "poll" in m and "failed" in m]
        assert failed and all(m.startswith("cluster nova: ") for m in failed), failed
    finally:
        os.kill(restd, signal.SIGCONT)
    await wait_for(lambda: source_status(database, "nova")[1] is None or None, 60, "nova back")
    assert (await get(port, "/readyz?cluster=nova"))[0] == 200


@pytest.mark.timeout(300)
async def test_a_stuck_nova_poll_is_restarted_inside_and_skynet_stays_ready_current_and_fed(
    bot: Bot, watchdog: Watchdog, caplog: pytest.LogCaptureFixture
) -> None:
    """nova's poll worker stopped mid-digest: the poll is abandoned and started again inside
    the bot; skynet stays ready and current, and the watchdog is fed, all along."""
    port, database = bot.port, bot.database
    watched_from = time.monotonic()
    workers = [
        int(m.group(1))
        for r in [*caplog.get_records("setup"), *caplog.records]
        if (m := re.match(r"cluster nova: poll worker started \(pid (\d+)\)", r.getMessage()))
    ]
    assert workers, "nova's poll worker was never started"
    worker = workers[-1]
    os.kill(worker, signal.SIGSTOP)
    stuck_at = time.time()
    not_ready = []
    try:

        async def abandoned() -> bool:  # and skynet's readiness meanwhile
            if any("abandoned" in r.getMessage() and "nova" in r.getMessage()
                   for r in caplog.records):  # fmt: skip
                return True
            status, text = await get(port, "/readyz?cluster=skynet")
            if status != 200:
                not_ready.append(text)
            return False

        await wait_for(abandoned, 90, "nova's stuck poll to be abandoned")
        abandoned_at = time.time()
        # skynet's polls went on while nova's was stuck.
        taken, error = source_status(database, "skynet")
        assert error is None and taken is not None and taken > stuck_at, (taken, stuck_at)
    finally:
        with contextlib.suppress(ProcessLookupError):  # killed with the poll it hung
            os.kill(worker, signal.SIGCONT)
    assert not not_ready, not_ready[:3]
    # nova is polled again, by a new worker.
    await stored_poll(database, "nova", abandoned_at)
    assert (await get(port, "/readyz?cluster=nova"))[0] == 200
    fresh = (await ask(bot.slack, "alice", "jobs"))["text"]
    age = re.search(r"_as of (just now|(\d+) s ago)_", fresh)
    assert "On cluster `skynet`" in fresh and age is not None, fresh
    assert age.group(2) is None or int(age.group(2)) < 10, fresh
    gap = watchdog.longest_gap(watched_from)
    assert watchdog.pings and gap < 5.0, f"the watchdog went {gap:.1f} s without a ping"
