"""/metrics, /livez (/healthz) and /readyz of a running bot, scraped over loopback."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from msgspec.structs import replace

from bot.config import (
    DatabaseConfig,
    MetricsConfig,
    SlackConfig,
    SlurmConfig,
    load_config,
)
from bot.metrics import parked_reason
from store.outbox import OutboxMessage, enqueue
from store.writer import StoreWriter
from tests.support.bot_process import free_port, running_bot, wait_until_listening
from tests.support.cluster import wait_for
from tests.support.slack_standin import SlackStandIn, SlackUser


async def test_metrics_and_health_report_what_the_bot_holds(tmp_path: Path) -> None:
    port = free_port()
    config = replace(
        load_config(None),
        slack=SlackConfig(mode="socket"),
        # No Slurm here: the poll fails, so health must say so.
        slurm=SlurmConfig(bin_dir=str(tmp_path / "no-slurm"), poll_seconds=60),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
        metrics=MetricsConfig(port=port),
    )
    base = f"http://127.0.0.1:{port}"
    # One DM Slack takes, one to a user Slack does not know (parked: user_not_found).
    writer = StoreWriter(tmp_path / "skybot.db")
    await writer.run(
        enqueue,
        [OutboxMessage("ok", "U1", "hello"), OutboxMessage("ghost", "U404", "nobody")],
        time.time(),
    )
    writer.close()
    async with (
        SlackStandIn(users=[SlackUser("U1", "alice")]) as slack,
        running_bot(config, slack, stop_timeout=20),
    ):
        await slack.wait_for_socket_connection(timeout=10)
        await wait_until_listening(f"{base}/healthz")
        await slack.wait_for_calls("chat.postMessage", 2, timeout=10)
        for text in ("help", "gpus hoffman-lab", "gpus hoffman-lab", "nonsense words"):
            await slack.send_slash_command(command="/sky", text=text, timeout=10)
        async with aiohttp.ClientSession() as session:
            # Until the first Slurm poll has run, the link was seen up, the commands and the
            # DMs are counted.
            settled = (
                'skybot_poll_duration_seconds_count{cluster="skynet",source="slurm"} 1.0',
                "skybot_command_duration_seconds_count 4.0",
                "skybot_slack_connected 1.0",
                'skybot_outbox_messages{state="queued"} 0.0',
            )

            async def settled_metrics() -> str | None:
                async with session.get(f"{base}/metrics") as response:
                    assert response.status == 200
                    text = await response.text()
                return text if all(line in text for line in settled) else None

            text = await wait_for(settled_metrics, 10, f"/metrics to show {settled}", 0.05)
            async with session.get(f"{base}/readyz") as response:
                ready_status = response.status
                ready = await response.json()
            for path in ("/livez", "/healthz"):
                async with session.get(f"{base}{path}") as response:
                    assert response.status == 200, path
                    assert (await response.json())["alive"] is True
    assert 'skybot_commands_total{command="gpus"} 2.0' in text
    assert 'skybot_commands_total{command="help"} 1.0' in text
    assert 'skybot_commands_total{command="unknown"} 1.0' in text
    assert "skybot_command_duration_seconds_count 4.0" in text
    assert 'skybot_poll_duration_seconds_count{cluster="skynet",source="slurm"} 1.0' in text
    assert 'skybot_source_failing{cluster="skynet",source="slurm"} 1.0' in text
    assert 'skybot_outbox_messages{state="queued"} 0.0' in text
    assert 'skybot_outbox_parked_messages{reason="user_not_found"} 1.0' in text
    # Every message Slack accepted counts as one "ok" send.
    sent = re.search(r'skybot_outbox_messages\{state="sent"\} (\S+)', text)
    assert sent is not None and float(sent.group(1)) >= 1
    assert f'skybot_slack_sends_total{{result="ok"}} {sent.group(1)}' in text
    assert 'skybot_slack_sends_total{result="user_not_found"} 1.0' in text
    assert "skybot_outbox_sender_paused 0.0" in text
    assert "skybot_slack_connected 1.0" in text
    assert "skybot_slack_connections_total 1.0" in text
    assert 'skybot_ready{check="slurm",cluster="skynet"} 0.0' in text
    # The standard collectors, on the bot's own registry.
    for standard in ("process_resident_memory_bytes", "python_info", "python_gc_objects"):
        assert standard in text, standard
    # Slurm cannot be polled here: not ready, and the answer says which check fails.
    assert ready_status == 503 and ready["ready"] is False
    assert ready["checks"]["slurm"]["ok"] is False
    assert "has not answered" in ready["checks"]["slurm"]["detail"]
    assert ready["checks"]["slack"] == {"ok": True, "detail": "connected over Socket Mode"}
    assert ready["checks"]["sender"] == {"ok": True, "detail": "sending"}


@pytest.mark.cluster
async def test_health_is_ok_while_slurm_answers(tmp_path: Path, cluster: None) -> None:
    port = free_port()
    config = replace(
        load_config(None),
        slack=SlackConfig(mode="socket"),
        slurm=SlurmConfig(poll_seconds=1),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
        metrics=MetricsConfig(port=port),
    )
    base = f"http://127.0.0.1:{port}"
    async with SlackStandIn() as slack, running_bot(config, slack, stop_timeout=20):
        await wait_until_listening(f"{base}/readyz")
        async with aiohttp.ClientSession() as session:

            async def ready() -> tuple[int, Any] | None:
                async with session.get(f"{base}/readyz") as response:
                    status, body = response.status, await response.json()
                return (status, body) if status == 200 else None

            status, body = await wait_for(ready, 20, "/readyz to say ready", 0.2)
            async with session.get(f"{base}/metrics") as response:
                text = await response.text()
    assert status == 200 and body["ready"] is True
    assert {name: check["ok"] for name, check in body["checks"].items()} == {
        "slack": True,
        "slurm": True,
        "accounting": True,
        "sender": True,
        "pollers": True,
        "store": True,
        "exactly_once": True,
    }
    assert 'skybot_source_failing{cluster="skynet",source="slurm"} 0.0' in text
    assert "skybot_store_failing 0.0" in text
    assert 'skybot_snapshot_age_seconds{cluster="skynet",source="slurm"}' in text


@pytest.mark.parametrize(
    ("last_error", "reason"),
    [
        ("channel_not_found", "channel_not_found"),
        ("missing_scope (gave up after retries)", "missing_scope"),
        ("chart: lab hoffman-lab is gone from the config", "chart"),
        (None, "unknown"),
    ],
)
def test_parked_reasons_are_slacks_code_not_free_text(last_error: str | None, reason: str) -> None:
    assert parked_reason(last_error) == reason
