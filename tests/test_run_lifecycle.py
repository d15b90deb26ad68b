"""`skybot run` as systemd sees it, as a real process: SIGTERM ends it within 10 s whatever
state it is in; a port it cannot bind, or a database another instance holds, is one line on
stderr and an exit code before anything starts."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import time
from pathlib import Path

import pytest

from bot.exit_codes import EXIT_ALREADY_RUNNING, EXIT_PORT_UNAVAILABLE
from store.outbox import OutboxMessage, enqueue, outbox_rows
from store.writer import StoreWriter
from tests.support.bot_lifecycle import (
    exit_code_after_sigterm,
    readiness,
    running,
    write_config,
)
from tests.support.bot_process import VERBOSE_SKYBOT, free_port, start_bot, wait_until_listening
from tests.support.cluster import cluster_script, wait_for
from tests.support.slack_standin import SlackStandIn, SlackUser
from tests.support.slurm_wrappers import COMMANDS, write_wrappers


def stderr_lines(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines()


async def test_sigterm_ends_run_while_slack_is_unreachable(tmp_path: Path) -> None:
    port = free_port()
    nowhere = f"http://127.0.0.1:{free_port()}/api/"  # nothing listens there
    log = tmp_path / "stderr.log"
    async with SlackStandIn() as slack:
        with (
            log.open("wb") as err,
            running(
                start_bot(
                    write_config(tmp_path, metrics_port=port), slack, api_url=nowhere, stderr=err
                )
            ) as bot,
        ):
            await wait_until_listening(f"http://127.0.0.1:{port}/livez", attempts=400)
            body = await readiness(port)
            assert body["checks"]["slack"]["ok"] is False  # type: ignore[index]
            # Let it try, fail and wait to try again, as it would all through an outage.
            await wait_for(
                lambda: any("Failed to connect" in line for line in stderr_lines(log)),
                60,
                "a failed connection attempt logged",
                0.25,
            )
            assert bot.poll() is None
            code, _ = await exit_code_after_sigterm(bot)
    lines = stderr_lines(log)
    assert code == 0, lines[-5:]
    assert any("shutting down" in line for line in lines)
    # Each failed attempt is one warning line, not an ERROR with a traceback every few s.
    (attempt, *_) = [line for line in lines if "Failed to connect" in line]
    assert " WARNING bot.slack_link.sdk: Failed to connect (error: Cannot connect" in attempt
    assert not any(line.startswith("Traceback") for line in lines)


@pytest.mark.parametrize("taken", ["metrics", "http"])
async def test_a_taken_port_is_one_line_and_exit_1_before_anything_starts(
    taken: str, tmp_path: Path
) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        busy = squatter.getsockname()[1]
        config = (
            write_config(tmp_path, metrics_port=busy)
            if taken == "metrics"
            else write_config(tmp_path, metrics_port=free_port(), mode="http", http_port=busy)
        )
        log = tmp_path / "stderr.log"
        async with SlackStandIn() as slack:
            with (
                log.open("wb") as err,
                running(start_bot(config, slack, signing_secret="s3cret", stderr=err)) as bot,
            ):
                try:
                    code = await asyncio.to_thread(bot.wait, 60)
                except subprocess.TimeoutExpired:
                    pytest.fail("skybot run kept running with its port taken")
            calls = slack.calls
    assert code == EXIT_PORT_UNAVAILABLE
    (line,) = stderr_lines(log)
    assert line.startswith("skybot: cannot listen on 127.0.0.1:") and f":{busy} " in line
    assert "address already in use" in line
    # Nothing started: no Slack, no database.
    assert calls == []
    assert not (tmp_path / "skybot.db").exists()


async def test_a_second_instance_on_the_same_database_exits_3(tmp_path: Path) -> None:
    database = tmp_path / "shared.db"
    first_port, second_port = free_port(), free_port()
    log = tmp_path / "second.log"
    async with SlackStandIn() as slack:
        first_config = write_config(tmp_path, metrics_port=first_port, database=database)
        with running(start_bot(first_config, slack)) as first:
            await wait_until_listening(f"http://127.0.0.1:{first_port}/livez", attempts=400)
            second_config = write_config(tmp_path, metrics_port=second_port, database=database)
            with log.open("wb") as err, running(start_bot(second_config, slack, stderr=err)) as two:
                code = await asyncio.to_thread(two.wait, 60)
            assert first.poll() is None  # the first one is untouched
            first_code, _ = await exit_code_after_sigterm(first)
    assert code == EXIT_ALREADY_RUNNING
    (line,) = stderr_lines(log)
    assert line == (
        f"skybot: another skybot run (pid {first.pid}) already uses {database}; "
        "one instance per database"
    )
    assert first_code == 0


async def test_sigterm_ends_run_while_the_sender_waits_out_a_rate_limit(tmp_path: Path) -> None:
    database = tmp_path / "skybot.db"
    writer = StoreWriter(database)
    await writer.run(enqueue, [OutboxMessage("dm", "U1", "hello")], time.time())
    writer.close()
    port = free_port()
    async with SlackStandIn(users=[SlackUser("U1", "alice")]) as slack:
        # Slack says "come back in a minute", again and again: the SDK sleeps on it.
        slack.fail_next("chat.postMessage", status=429, retry_after=60, times=100)
        config = write_config(tmp_path, metrics_port=port)
        log = tmp_path / "bot.log"
        with (
            log.open("wb") as out,
            running(start_bot(config, slack, VERBOSE_SKYBOT, log=out)) as bot,
        ):
            await slack.wait_for_call("chat.postMessage", timeout=60)
            # The SDK's rate-limit handler took the 429 and waits before trying again.
            await wait_for(
                lambda: any("A retry handler found" in line for line in stderr_lines(log)),
                30,
                "the SDK to retry the 429",
                0.05,
            )
            code, _ = await exit_code_after_sigterm(bot)
    assert code == 0
    writer = StoreWriter(database)
    try:
        (row,) = await writer.run(outbox_rows)
    finally:
        writer.close()
    assert row["state"] == "queued"  # still there for the next start


async def test_systemd_hears_ready_the_watchdog_and_stopping(tmp_path: Path) -> None:
    """Type=notify and WatchdogSec=, with a socket standing in for systemd's."""
    notify_path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as systemd:
        systemd.bind(str(notify_path))
        systemd.settimeout(60)
        env = {"NOTIFY_SOCKET": str(notify_path), "WATCHDOG_USEC": "30000000"}
        port = free_port()
        async with SlackStandIn() as slack:
            with running(
                start_bot(write_config(tmp_path, metrics_port=port), slack, extra_env=env)
            ) as bot:
                heard = [(await asyncio.to_thread(systemd.recv, 256)).decode() for _ in range(3)]
                assert heard[0] == "READY=1"
                assert heard[1:] == ["WATCHDOG=1", "WATCHDOG=1"]  # the loop's heartbeat
                code, _ = await exit_code_after_sigterm(bot)
            systemd.settimeout(0)
            rest = []
            with contextlib.suppress(BlockingIOError):
                while True:
                    rest.append(systemd.recv(256).decode())
    assert code == 0
    assert "STOPPING=1" in rest


def _squeue_hangs() -> bool:
    try:
        subprocess.run(["squeue", "-h"], capture_output=True, timeout=3)
    except subprocess.TimeoutExpired:
        return True
    return False


def _errors(log: Path) -> list[str]:
    """Lines a shutdown must not write: it is not a failure."""
    lines = log.read_text(errors="replace").splitlines()
    return [line for line in lines if " ERROR " in line or line.startswith("Traceback")]


@pytest.mark.cluster
async def test_sigterm_ends_run_while_slurm_hangs(tmp_path: Path, cluster: None) -> None:
    port = free_port()
    slurm = "poll_seconds = 2\ncommand_timeout_seconds = 120\ncaps_poll_seconds = 2\n"
    config = write_config(tmp_path, metrics_port=port, slurm=slurm)
    log = tmp_path / "skybot.log"
    async with SlackStandIn() as slack:
        with log.open("wb") as out, running(start_bot(config, slack, log=out)) as bot:
            await wait_until_listening(f"http://127.0.0.1:{port}/livez", attempts=400)
            await slack.wait_for_socket_connection(timeout=30)
            # By the cluster's script: only the controller of the cluster under test.
            cluster_script("pause-controller")
            try:
                assert _squeue_hangs()
                await asyncio.sleep(4)  # the bot's polls are stuck in squeue/sinfo too
                code, _ = await exit_code_after_sigterm(bot)
            finally:
                cluster_script("resume-controller")
    assert code == 0
    assert _errors(log) == []


async def test_sigterm_during_slow_polls_of_every_source_logs_no_error(tmp_path: Path) -> None:
    """Every Slurm command (squeue, sinfo, sacct, sacctmgr, scontrol) takes minutes: SIGTERM
    ends the polls in flight, which is a normal stop, not a job that "raised an exception"."""
    started = tmp_path / "polls-started"
    started.mkdir()
    slow = write_wrappers(
        tmp_path / "slow-slurm", {c: f"touch {started}/{c}\nexec sleep 600" for c in COMMANDS}
    )
    port = free_port()
    slurm = f'bin_dir = "{slow}"\npoll_seconds = 2\ncommand_timeout_seconds = 300\n'
    config = write_config(tmp_path, metrics_port=port, slurm=slurm)
    log = tmp_path / "skybot.log"
    async with SlackStandIn() as slack:
        with log.open("wb") as out, running(start_bot(config, slack, log=out)) as bot:
            await wait_until_listening(f"http://127.0.0.1:{port}/livez", attempts=400)
            await wait_for(
                lambda: {p.name for p in started.iterdir()} >= {"squeue", "sacct", "sacctmgr"},
                10,
                "the polls of squeue, sacct and sacctmgr to start",
                0.05,
            )
            code, _ = await exit_code_after_sigterm(bot)
    assert code == 0
    assert _errors(log) == [], log.read_text(errors="replace")
