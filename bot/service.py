"""`skybot run`: pollers, store and Slack transport in one asyncio process (as slack-machine)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from slack_bolt.async_app import AsyncApp

from bot.app import (
    DEFAULT_SLACK_API_URL,
    build_app,
    connect_socket_mode,
    serve_http,
    web_client,
)
from bot.config import Config, Secrets, database_path
from bot.metrics import Metrics, metrics_app
from bot.runner_client import RunnerCall, call_runner
from core.view import LabInfo
from handlers.charts import ChartRequests
from handlers.identity import IdentityDirectory
from handlers.services import Services
from scheduler.chart_maker import ChartMaker
from scheduler.digest import WeeklyDigest
from scheduler.outbox_sender import OutboxSender, sender_client
from scheduler.schedule import PollSchedule, build_scheduler
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


def snapshot_cache(config: Config) -> SnapshotCache:
    """The in-memory view of the store that commands answer from, as the config describes it."""
    return SnapshotCache(
        database_path(config),
        lab_infos(config),
        config.slurm.overcap_account,
        config.slurm.overcap_partition,
        gpu_min_release=config.images.min_release,
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


@dataclass
class Runtime:
    """Everything `skybot run` starts, wired together; `run_bot` owns its lifetime."""

    writer: StoreWriter
    cache: SnapshotCache
    schedule: PollSchedule
    sender: OutboxSender
    submissions: SubmissionWorker
    app: AsyncApp
    metrics: Metrics


async def build_runtime(config: Config, secrets: Secrets) -> Runtime:
    path = database_path(config)
    writer = StoreWriter(path)
    cache = snapshot_cache(config)
    await cache.refresh()
    client = web_client(secrets)
    identity = IdentityDirectory(config.identity, writer, client)
    await identity.load()
    # Job DMs and storage alerts: watchers enqueue after each poll, the sender delivers.
    sender = OutboxSender(
        writer,
        sender_client(secrets.bot_token, secrets.api_url or DEFAULT_SLACK_API_URL),
        per_channel_per_second=config.notifications.messages_per_second_per_channel,
        charts=ChartMaker(config, writer),
    )
    watchers = Watchers(config, writer, identity, sender.wake, lambda: cache.current().snapshot)
    metrics = Metrics()
    schedule = build_scheduler(
        config,
        SlurmPoller(config, writer),
        StoragePoller(config, writer),
        cache.refresh,
        after_slurm=watchers.after_slurm_poll,
        after_storage=watchers.after_storage_poll,
        observe=metrics.observe_poll,
        weekly_digest=WeeklyDigest(config, writer, sender.wake).run,
    )
    runner = runner_call(config)
    submissions = SubmissionWorker(config, writer, runner, wake_sender=sender.wake)
    services = Services(
        config,
        identity,
        runner,
        submissions=submissions,
        writer=writer,
        queue_charts=ChartRequests(writer, sender.wake),
        view=cache.current,
    )
    app = build_app(config, secrets, cache, services, client, metrics.observe_command)
    return Runtime(writer, cache, schedule, sender, submissions, app, metrics)


async def run_bot(config: Config, secrets: Secrets, stop: asyncio.Event | None = None) -> None:
    """Run until `stop` is set (or SIGTERM/SIGINT arrives)."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)

    runtime = await build_runtime(config, secrets)
    runtime.schedule.start()
    # The watchers run after every poll attempt, so transitions recorded before a restart are
    # caught up on right away; the sender delivers whatever is queued, old or new.
    workers_stop = asyncio.Event()
    workers = [
        asyncio.create_task(runtime.sender.run(workers_stop), name="outbox-sender"),
        asyncio.create_task(runtime.submissions.run(workers_stop), name="submission-worker"),
    ]
    http_runner = None
    socket_handler = None
    metrics_runner = await _serve_metrics(config, runtime)
    try:
        if config.slack.mode == "http":
            http_runner = await serve_http(
                runtime.app, config.slack.http_host, config.slack.http_port
            )
        else:
            socket_handler = await connect_socket_mode(runtime.app, secrets.app_token)
        await stop.wait()
    finally:
        log.info("shutting down")
        await runtime.schedule.stop()
        if socket_handler is not None:
            await socket_handler.close_async()
        if http_runner is not None:
            await http_runner.cleanup()
        if metrics_runner is not None:
            await metrics_runner.cleanup()
        workers_stop.set()
        try:
            await asyncio.wait_for(asyncio.gather(*workers), timeout=10)
        except TimeoutError:
            log.warning("background workers did not stop in time; queued work stays queued")
        runtime.cache.close()
        runtime.writer.close()


async def _serve_metrics(config: Config, runtime: Runtime) -> web.AppRunner | None:
    if not config.metrics.port:
        return None
    app = metrics_app(
        runtime.metrics,
        runtime.cache.current,
        runtime.writer,
        max_age_seconds=config.metrics.stale_after_polls * config.slurm.poll_seconds,
    )
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, config.metrics.host, config.metrics.port).start()
    log.info("metrics on http://%s:%d/metrics", config.metrics.host, config.metrics.port)
    return runner
