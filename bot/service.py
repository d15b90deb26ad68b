"""`skybot run`: pollers, store and Slack transport in one asyncio process (as slack-machine)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Any

from bot.app import build_app, connect_socket_mode, serve_http, web_client
from bot.config import Config, Secrets, database_path
from bot.runner_client import call_runner
from core.view import LabInfo
from handlers.identity import IdentityDirectory, RunnerCall
from handlers.services import Services
from scheduler.schedule import build_scheduler
from scheduler.slurm_poller import SlurmPoller
from scheduler.storage_poller import StoragePoller
from store.reader import SnapshotCache
from store.writer import StoreWriter

log = logging.getLogger(__name__)


def lab_infos(config: Config) -> tuple[LabInfo, ...]:
    return tuple(
        LabInfo(lab.name, lab.partition, lab.account, lab.storage_roots) for lab in config.labs
    )


def runner_call(config: Config) -> RunnerCall:
    async def call(user: str, request: dict[str, Any]) -> dict[str, Any]:
        return await call_runner(
            user,
            request,
            sudo=config.runner.sudo,
            runner=config.runner.path,
            timeout=config.runner.timeout_seconds,
        )

    return call


async def run_bot(config: Config, secrets: Secrets, stop: asyncio.Event | None = None) -> None:
    """Run until `stop` is set (or SIGTERM/SIGINT arrives)."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)

    path = database_path(config)
    writer = StoreWriter(path)
    cache = SnapshotCache(
        path, lab_infos(config), config.slurm.overcap_account, config.slurm.overcap_partition
    )
    await cache.refresh()
    slurm = SlurmPoller(config, writer)
    storage = StoragePoller(config, writer)
    scheduler = build_scheduler(config, slurm, storage, cache.refresh)
    client = web_client(secrets)
    identity = IdentityDirectory(config.identity, writer, client)
    await identity.load()
    services = Services(config, identity, runner_call(config))
    app = build_app(config, secrets, cache, services, client)

    scheduler.start()
    http_runner = None
    socket_handler = None
    try:
        if config.slack.mode == "http":
            http_runner = await serve_http(app, config.slack.http_host, config.slack.http_port)
        else:
            socket_handler = await connect_socket_mode(app, secrets.app_token)
        await stop.wait()
    finally:
        log.info("shutting down")
        scheduler.shutdown(wait=False)
        if socket_handler is not None:
            await socket_handler.close_async()
        if http_runner is not None:
            await http_runner.cleanup()
        cache.close()
        writer.close()
