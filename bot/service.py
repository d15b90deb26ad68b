"""`skybot run`: pollers, store and Slack transport in one asyncio process (as slack-machine)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Any

from bot.app import (
    DEFAULT_SLACK_API_URL,
    build_app,
    connect_socket_mode,
    serve_http,
    web_client,
)
from bot.config import Config, Secrets, database_path
from bot.runner_client import RunnerCall, call_runner
from core.view import LabInfo
from handlers.identity import IdentityDirectory
from handlers.services import Services
from scheduler.outbox_sender import OutboxSender, sender_client
from scheduler.schedule import build_scheduler, stop_scheduler
from scheduler.slurm_poller import SlurmPoller
from scheduler.storage_poller import StoragePoller
from scheduler.submit_worker import SubmissionWorker
from scheduler.watchers import Watchers
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
    client = web_client(secrets)
    identity = IdentityDirectory(config.identity, writer, client)
    await identity.load()
    # Job DMs and storage alerts: watchers enqueue after each poll, the sender delivers.
    sender = OutboxSender(
        writer,
        sender_client(secrets.bot_token, secrets.api_url or DEFAULT_SLACK_API_URL),
        per_channel_per_second=config.notifications.messages_per_second_per_channel,
    )
    watchers = Watchers(config, writer, identity, sender.wake, lambda: cache.current().snapshot)
    scheduler = build_scheduler(
        config,
        slurm,
        storage,
        cache.refresh,
        after_slurm=watchers.after_slurm_poll,
        after_storage=watchers.after_storage_poll,
    )
    runner = runner_call(config)
    submissions = SubmissionWorker(config, writer, runner, wake_sender=sender.wake)
    services = Services(config, identity, runner, submissions=submissions, writer=writer)
    app = build_app(config, secrets, cache, services, client)

    scheduler.start()
    # The watchers run after every poll attempt, so transitions recorded before a restart are
    # caught up on right away; the sender delivers whatever is queued, old or new.
    sender_stop = asyncio.Event()
    sender_task = asyncio.create_task(sender.run(sender_stop), name="outbox-sender")
    submit_task = asyncio.create_task(submissions.run(sender_stop), name="submission-worker")
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
        await stop_scheduler(scheduler)
        if socket_handler is not None:
            await socket_handler.close_async()
        if http_runner is not None:
            await http_runner.cleanup()
        sender_stop.set()
        try:
            await asyncio.wait_for(asyncio.gather(sender_task, submit_task), timeout=10)
        except TimeoutError:
            log.warning("background workers did not stop in time; queued work stays queued")
        cache.close()
        writer.close()
