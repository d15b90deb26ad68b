"""/metrics and /healthz of a running bot, scraped over loopback."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest

from bot.config import (
    DatabaseConfig,
    MetricsConfig,
    SlackConfig,
    SlurmConfig,
    load_config,
)
from tests.bot_process import free_port, running_bot, wait_until_listening
from tests.slack_standin import SlackStandIn


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
    async with SlackStandIn() as slack, running_bot(config, slack, stop_timeout=20):
        await slack.wait_for_socket_connection(timeout=10)
        await wait_until_listening(f"{base}/healthz")
        for text in ("help", "gpus hoffman-lab", "gpus hoffman-lab", "nonsense words"):
            await slack.send_slash_command(command="/sky", text=text, timeout=10)
        await asyncio.sleep(0.5)  # the first polls have run
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/metrics") as response:
                assert response.status == 200
                text = await response.text()
            async with session.get(f"{base}/healthz") as response:
                health_status = response.status
                health = await response.json()
    assert 'skybot_commands_total{command="gpus"} 2.0' in text
    assert 'skybot_commands_total{command="help"} 1.0' in text
    assert 'skybot_commands_total{command="unknown"} 1.0' in text
    assert "skybot_command_duration_seconds_count 4.0" in text
    assert 'skybot_poll_duration_seconds_count{source="slurm"} 1.0' in text
    assert 'skybot_source_failing{source="slurm"} 1.0' in text
    assert 'skybot_outbox_messages{state="queued"} 0.0' in text
    assert health_status == 503 and not health["ok"]
    assert any(p.startswith("slurm:") for p in health["problems"])


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
        await wait_until_listening(f"{base}/healthz")
        status, body = 0, {}
        async with aiohttp.ClientSession() as session:
            for _ in range(50):
                async with session.get(f"{base}/healthz") as response:
                    status, body = response.status, await response.json()
                if status == 200:
                    break
                await asyncio.sleep(0.2)
            async with session.get(f"{base}/metrics") as response:
                text = await response.text()
    assert (status, body) == (200, {"ok": True, "problems": []})
    assert 'skybot_source_failing{source="slurm"} 0.0' in text
    assert 'skybot_snapshot_age_seconds{source="slurm"}' in text
