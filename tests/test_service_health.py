"""Readiness and the outbox through a whole bot, against the stand-in: a Socket Mode outage
makes the bot not ready and its end ready again; a refused token pauses the outbox, parks
nothing, and everything arrives once when Slack takes the token again."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from msgspec.structs import replace

from bot.config import Config, DatabaseConfig, MetricsConfig, SlackConfig, SlurmConfig, load_config
from store.outbox import OutboxMessage, enqueue, outbox_rows
from store.writer import StoreWriter
from tests.support.bot_process import free_port, running_bot, wait_until_listening
from tests.support.cluster import wait_for
from tests.support.outbox_sender import wait_until_settled
from tests.support.slack_standin import SlackStandIn, SlackUser

USERS = [SlackUser("U1", "alice"), SlackUser("U2", "bob"), SlackUser("U3", "carol")]


def bot_config(tmp_path: Path, slurm: SlurmConfig) -> Config:
    return replace(
        load_config(None),
        slack=SlackConfig(mode="socket"),
        slurm=slurm,
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
        metrics=MetricsConfig(port=free_port()),
    )


async def get(config: Config, path: str) -> tuple[int, Any]:
    url = f"http://127.0.0.1:{config.metrics.port}{path}"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        body = await response.json() if path != "/metrics" else await response.text()
        return response.status, body


def answering(
    config: Config, path: str, wanted: Callable[[int, Any], bool]
) -> Callable[[], Awaitable[tuple[int, Any] | None]]:
    """A check for wait_for: GET `path`; its (status, body) once `wanted` says so."""

    async def check() -> tuple[int, Any] | None:
        status, body = await get(config, path)
        return (status, body) if wanted(status, body) else None

    return check


@pytest.mark.cluster
async def test_readiness_follows_the_slack_connection(tmp_path: Path, cluster: None) -> None:
    config = bot_config(tmp_path, SlurmConfig(poll_seconds=1))
    async with SlackStandIn() as slack, running_bot(config, slack, stop_timeout=20):
        await wait_until_listening(f"http://127.0.0.1:{config.metrics.port}/readyz")
        await wait_for(
            answering(config, "/readyz", lambda s, _: s == 200), 60, "ready at start", 0.25
        )

        await slack.take_socket_mode_down()
        _, body = await wait_for(
            answering(config, "/readyz", lambda s, _: s == 503), 30, "not ready", 0.25
        )
        assert body["ready"] is False
        assert body["checks"]["slack"]["ok"] is False
        assert body["checks"]["slack"]["detail"].startswith("disconnected for ")
        assert body["checks"]["slurm"]["ok"] and body["checks"]["sender"]["ok"]
        _, metrics = await get(config, "/metrics")
        assert "skybot_slack_connected 0.0" in metrics
        # Liveness is not readiness: the bot is alive throughout.
        assert (await get(config, "/livez"))[0] == 200

        slack.bring_socket_mode_up()
        _, body = await wait_for(
            answering(config, "/readyz", lambda s, _: s == 200), 60, "ready again", 0.25
        )
        assert body["checks"]["slack"] == {"ok": True, "detail": "connected over Socket Mode"}
        _, metrics = await get(config, "/metrics")
        assert "skybot_slack_connected 1.0" in metrics
        assert "skybot_slack_connections_total 2.0" in metrics


async def test_an_account_inactive_storm_pauses_the_outbox_and_loses_nothing(
    tmp_path: Path,
) -> None:
    # No Slurm here: this is about Slack only.
    config = bot_config(tmp_path, SlurmConfig(bin_dir=str(tmp_path / "no-slurm"), poll_seconds=60))
    # Token checks every 0.2-0.5 s instead of 5 s, 10 s, ..., and no pacing between
    # messages: the storm is the same, minus 15 s of waiting.
    config = replace(
        config,
        notifications=replace(
            config.notifications,
            token_probe_seconds=0.2,
            token_probe_max_seconds=0.5,
            messages_per_second_per_channel=20,
        ),
    )
    messages = [OutboxMessage(f"m{i}", USERS[i % 3].id, f"message {i}") for i in range(20)]
    writer = StoreWriter(config.database.path)
    await writer.run(enqueue, messages, time.time())
    async with SlackStandIn(users=USERS) as slack:
        slack.refuse_bot_token("account_inactive")
        async with running_bot(config, slack, stop_timeout=20):
            await wait_until_listening(f"http://127.0.0.1:{config.metrics.port}/readyz")
            _, body = await wait_for(
                answering(config, "/readyz", lambda _, b: not b["checks"]["sender"]["ok"]),
                30,
                "the sender paused",
                0.25,
            )
            assert (
                "Slack refuses the token (account_inactive)" in body["checks"]["sender"]["detail"]
            )
            # It keeps checking the token, and sends nothing meanwhile.
            await slack.wait_for_call("auth.test", timeout=30, predicate=lambda c: not c.ok)
            # At the configured pace: with the default 5 s, 10 s, ... this takes over 30 s.
            await slack.wait_for_calls("auth.test", 5, timeout=15, predicate=lambda c: not c.ok)
            _, metrics = await get(config, "/metrics")
            assert "skybot_outbox_sender_paused 1.0" in metrics
            assert 'skybot_slack_sends_total{result="account_inactive"} 1.0' in metrics
            assert 'skybot_ready{check="sender",cluster=""} 0.0' in metrics
            assert "skybot_outbox_parked_messages{" not in metrics
            rows = await writer.run(outbox_rows)
            assert {r["state"] for r in rows} == {"queued"}

            slack.accept_bot_token()
            await wait_for(
                answering(config, "/readyz", lambda _, b: b["checks"]["sender"]["ok"]),
                90,
                "the sender resumed",
                0.25,
            )
            await wait_until_settled(writer, timeout=60)
    rows = await writer.run(outbox_rows)
    writer.close()
    assert {r["state"] for r in rows} == {"sent"}
    # (The storage poller may have queued an alert of its own meanwhile; it went out too.)
    texts = Counter(m["text"] for m in slack.messages.values() if m["text"].startswith("message "))
    assert texts == Counter(m.text for m in messages)  # every one, exactly once
    refused = [c for c in slack.calls_to("chat.postMessage") if not c.ok]
    assert len(refused) == 1  # the storm did not make it try each message
