"""`skybot run`: pollers, store and Slack transport in one asyncio process (as slack-machine).

Start-up order matters to an admin: the database's instance lock, every listening port and
the database are claimed before anything starts, so a second instance, a taken port or an
unusable database is one line and an exit code (bot/startup.py); signals are handled from the
moment the event loop runs (before it, SIGTERM ends a process that has started nothing);
Slack is connected in the background, so an unreachable Slack delays nothing and stops
nothing. Shutdown is bounded: SIGTERM ends the process within seconds in any state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

from aiohttp import web
from slack_bolt.async_app import AsyncApp

from bot.adoption import adopt_rows
from bot.app import (
    DEFAULT_SLACK_API_URL,
    build_app,
    web_client,
)
from bot.cluster_wing import ClusterWing, bind_actions, build_wing, runner_call
from bot.config import Config, Secrets
from bot.health import ClusterHealth, Heartbeat, ServiceStatus
from bot.metrics import Metrics, metrics_app
from bot.polling import STUCK_FACTOR, poll_hooks
from bot.scopes import TokenScopes
from bot.slack_link import SocketModeLink, socket_mode_handler
from bot.startup import Claim, claimed
from bot.systemd_notify import notify, watchdog_enabled
from core.rate_limit import RateLimiter
from handlers.charts import ChartRequests
from handlers.click_answers import OutboxDms
from handlers.clusters import ClusterDesks
from handlers.identity import IdentityDirectory
from handlers.services import Services
from scheduler.chart_maker import ChartMaker
from scheduler.digest import WeeklyDigest
from scheduler.outbox_policy import SenderPacing
from scheduler.outbox_sender import OutboxSender
from scheduler.schedule import PollSchedule, build_schedule
from scheduler.sender_client import sender_client
from scheduler.slack_limits import SlackLimits
from scheduler.submit_worker import SubmissionWorker
from store.reader import SnapshotCache
from store.writer import StoreWriter

log = logging.getLogger(__name__)


# The loop shares the interpreter with the store's threads (the writer's save after each
# poll, the snapshot reload). A thread that wants the GIL waits this long before asking its
# holder to let go, so under Python's default of 5 ms an ack arriving during a save or a
# reload waited up to 5 ms for each turn. benchmarks/poll_ack_latency.py, 100,000 jobs with
# 2% changing per poll, p99 polling against paused: 1.68x at 5 ms; at 1 ms 1.00-2.44x over
# six runs; at 0.2 ms 1.47x and 1.42x. The price, paid only while two threads want the
# interpreter: about 6% of the background thread's throughput.
GIL_SWITCH_SECONDS = 0.0002

# SIGTERM to exit, whatever is in flight: shutdown gets this long in all (the promise is 10 s;
# closing the store comes after), each step at most STEP_SECONDS of it.
SHUTDOWN_SECONDS = 7.0
STEP_SECONDS = 3.0


@dataclass
class Runtime:
    """Everything `skybot run` starts, wired together; `run_bot` owns its lifetime."""

    writer: StoreWriter
    # One per configured cluster, the default first.
    wings: list[ClusterWing]
    schedule: PollSchedule
    sender: OutboxSender
    app: AsyncApp
    metrics: Metrics
    heartbeat: Heartbeat = field(default_factory=Heartbeat)
    slack: SocketModeLink | None = None

    @property
    def cache(self) -> SnapshotCache:
        """The default cluster's snapshot (readiness reads its age)."""
        return self.wings[0].cache

    @property
    def submissions(self) -> list[SubmissionWorker]:
        return [wing.submissions for wing in self.wings if wing.submissions is not None]


async def build_runtime(config: Config, secrets: Secrets, writer: StoreWriter) -> Runtime:
    # Rows from before clusters had names are today's cluster's: named before anything reads.
    await adopt_rows(config, writer)
    # One token, one set of Slack's limits, whichever client calls.
    limits = SlackLimits(messages_per_minute=config.notifications.messages_per_minute)
    client = web_client(secrets, limits)
    metrics = Metrics()
    # Job DMs and storage alerts: watchers enqueue after each poll, the sender delivers.
    sender = OutboxSender(
        writer,
        sender_client(
            secrets.bot_token,
            secrets.api_url or DEFAULT_SLACK_API_URL,
            metrics.observe_send,
            limits,
        ),
        SenderPacing.from_config(config.notifications),
        charts=ChartMaker(config, writer),
        observe=metrics.observe_send,
    )
    # A new link DMs the Slack accounts linked to that cluster account before, at once.
    identity = IdentityDirectory(config.identity, writer, client, wake_sender=sender.wake)
    await identity.load()
    wings = [
        await build_wing(config, cluster, writer, identity, sender.wake)
        for cluster in config.clusters
    ]
    polls = [job for wing in wings for job in wing.polls]
    schedule = build_schedule(
        polls,
        poll_hooks(config, metrics, writer, [wing.poller for wing in wings], polls),
        [WeeklyDigest(config, writer, sender.wake).calendar()],
    )
    schedule.on_clock_step.append(sender.clock_stepped)
    shared = Services(
        config,
        identity,
        runner_call(config, config.default_cluster),
        writer=writer,
        queue_charts=ChartRequests(writer, sender.wake),
        limiter=RateLimiter(),
        dm=OutboxDms(writer, sender.wake),
    )
    for wing in wings:
        bind_actions(wing, schedule, writer, sender.wake, shared)
    desks = ClusterDesks([wing.desk() for wing in wings])
    default = desks.default.services or shared
    app = build_app(
        config, secrets, wings[0].cache, default, client, metrics.observe_command, desks
    )
    # Under systemd's WatchdogSec=, the loop's own heartbeat keeps the watchdog fed while the
    # process works: a wedged loop, writer or sender stops feeding it, and systemd restarts
    # the service. A stuck poll does not: it is one cluster's, abandoned and started again
    # inside the bot (scheduler/schedule.py), while the other clusters go on.
    watchdog = _feed_watchdog(writer, sender) if watchdog_enabled() else None
    heartbeat = Heartbeat(on_beat=watchdog)
    runtime = Runtime(writer, wings, schedule, sender, app, metrics, heartbeat)
    if config.slack.mode != "http":
        runtime.slack = _socket_mode(app, secrets, metrics, sender)
    return runtime


def _socket_mode(
    app: AsyncApp, secrets: Secrets, metrics: Metrics, sender: OutboxSender
) -> SocketModeLink:
    def connected() -> None:
        metrics.observe_slack_connected()
        sender.link_restored()  # what waited on the outage goes out now

    return SocketModeLink(socket_mode_handler(app, secrets.app_token), connected)


def late_polls(
    config: Config, schedule: PollSchedule, cluster: str | None = None, factor: float = 1.0
) -> list[str]:
    """The polls (of `cluster`, if given) that have not completed within `stale_after_polls`
    intervals (times `factor`) plus their command timeout."""
    now = asyncio.get_running_loop().time()
    return schedule.late_polls(now, factor * config.metrics.stale_after_polls, cluster)


# The writer thread stuck in one call, or the outbox sender in one pass, this long: the
# process no longer does its work, and the watchdog is not fed. Generous: a save of a
# 100,000-job poll takes seconds, a pass waits out Slack's rate limits.
WRITER_STUCK_SECONDS = 300.0
SENDER_STUCK_SECONDS = 900.0


def process_stuck(writer: StoreWriter, sender: OutboxSender, now: float | None = None) -> list[str]:
    """What of the process's own work is stuck (the event loop is, if this is not called)."""
    now = time.monotonic() if now is None else now
    stuck = []
    if writer.busy_since is not None and now - writer.busy_since > WRITER_STUCK_SECONDS:
        stuck.append(
            f"the database writer has been in one call for {now - writer.busy_since:.0f} s"
        )
    if sender.pass_since is not None and now - sender.pass_since > SENDER_STUCK_SECONDS:
        stuck.append(f"the outbox sender has been in one pass for {now - sender.pass_since:.0f} s")
    return stuck


def _feed_watchdog(writer: StoreWriter, sender: OutboxSender) -> Callable[[], None]:
    said = False

    def beat() -> None:
        nonlocal said
        stuck = process_stuck(writer, sender)
        if not stuck:
            notify("WATCHDOG=1")
            said = False
        elif not said:
            said = True
            log.error(
                "not feeding the systemd watchdog, so it restarts skybot: %s", "; ".join(stuck)
            )

    return beat


async def run_bot(config: Config, secrets: Secrets, stop: asyncio.Event | None = None) -> None:
    """Claim (bot/startup.py), then run until `stop` is set (or SIGTERM/SIGINT arrives).

    Raises StartupError, before starting anything, if another instance holds the database, a
    port cannot be bound or the database cannot be used.
    """
    with claimed(config) as claim:
        await run_claimed(config, secrets, claim, stop)


async def run_claimed(
    config: Config, secrets: Secrets, claim: Claim, stop: asyncio.Event | None = None
) -> None:
    """Run on what start-up claimed until `stop` is set (or SIGTERM/SIGINT arrives)."""
    stop = stop or asyncio.Event()
    sys.setswitchinterval(GIL_SWITCH_SECONDS)
    with _stop_on_signals(stop):
        if stop.is_set():
            return
        runtime = await build_runtime(config, secrets, claim.writer)
        try:
            await _serve(config, runtime, claim.sockets, stop)
        finally:
            for wing in runtime.wings:
                wing.cache.close()


async def _serve(
    config: Config, runtime: Runtime, sockets: dict[str, socket.socket], stop: asyncio.Event
) -> None:
    scopes = TokenScopes(runtime.app.client)
    status = ServiceStatus(
        clusters=[_cluster_health(config, runtime.schedule, wing) for wing in runtime.wings],
        sender_pause=lambda: runtime.sender.paused,
        heartbeat=runtime.heartbeat,
        slack=runtime.slack,
        store=runtime.writer.health,
        exactly_once=lambda: scopes.exactly_once()[1],
    )
    sites: list[web.AppRunner] = []
    workers_stop = asyncio.Event()
    workers: list[asyncio.Task[None]] = []
    try:
        if "metrics" in sockets:
            app = metrics_app(runtime.metrics, status, runtime.writer)
            sites.append(await _serve_on(app, sockets["metrics"], "metrics", "/metrics"))
        if "http" in sockets:
            events = runtime.app.web_app(path="/slack/events")
            sites.append(await _serve_on(events, sockets["http"], "Slack events", "/slack/events"))
        # A poll stuck this long is abandoned and started again inside the bot.
        runtime.schedule.start(STUCK_FACTOR * config.metrics.stale_after_polls)
        # The watchers run after every poll attempt, so transitions recorded before a restart
        # are caught up on right away; the sender delivers whatever is queued, old or new.
        workers = [
            asyncio.create_task(runtime.sender.run(workers_stop), name="outbox-sender"),
            asyncio.create_task(runtime.heartbeat.run(workers_stop), name="heartbeat"),
            asyncio.create_task(scopes.run(workers_stop), name="token-scopes"),
        ]
        # One submission worker per cluster: a slow sbatch on one delays no other.
        workers += [
            asyncio.create_task(worker.run(workers_stop), name=f"submission-worker@{name}")
            for worker, name in zip(
                runtime.submissions, (w.cluster.name for w in runtime.wings), strict=True
            )
        ]
        if runtime.slack is not None:
            workers.append(asyncio.create_task(runtime.slack.run(workers_stop), name="slack"))
        # Started: ports bound, pollers and workers running. Slack may still be connecting
        # (that is readiness, /readyz), which must not fail a start during a Slack outage.
        notify("READY=1")
        await stop.wait()
    finally:
        notify("STOPPING=1")
        log.info("shutting down")
        deadline = asyncio.get_running_loop().time() + SHUTDOWN_SECONDS
        await _bounded("stopping the pollers", runtime.schedule.stop(), deadline)
        workers_stop.set()
        await _bounded("stopping the background workers", _finish(workers), deadline)
        for site in sites:
            await _bounded("closing a listener", site.cleanup(), deadline)


def _cluster_health(config: Config, schedule: PollSchedule, wing: ClusterWing) -> ClusterHealth:
    name = wing.cluster.name
    polls = {job.name for job in wing.polls}
    return ClusterHealth(
        name,
        wing.cache.current,
        max_age_seconds=config.metrics.stale_after_polls * wing.cluster.slurm.poll_seconds,
        late_polls=lambda: late_polls(config, schedule, name),
        restarts=lambda: {p: n for p, n in schedule.restarts.items() if p in polls},
    )


async def _finish(tasks: list[asyncio.Task[None]]) -> None:
    """Let the workers stop by themselves; cancel whatever is still mid-call (a message being
    sent then stays queued, and is sent after the restart)."""
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=STEP_SECONDS - 0.5)
    for task in pending:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _bounded(what: str, step: Awaitable[None], deadline: float) -> None:
    budget = max(0.1, min(STEP_SECONDS, deadline - asyncio.get_running_loop().time()))
    try:
        await asyncio.wait_for(step, budget)
    except TimeoutError:
        log.warning("shutdown: %s took longer than %.1f s; going on", what, budget)
    except Exception:
        log.exception("shutdown: %s failed; going on", what)


async def _serve_on(
    app: web.Application, sock: socket.socket, what: str, path: str
) -> web.AppRunner:
    # No access log for scrapes and probes every few seconds; Slack's requests keep theirs.
    runner = web.AppRunner(app, access_log=None) if what == "metrics" else web.AppRunner(app)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    host, port = sock.getsockname()[:2]
    log.info("%s on http://%s:%d%s", what, host, port, path)
    return runner


@contextlib.contextmanager
def _stop_on_signals(stop: asyncio.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set `stop`, from the first moment of the run to its last."""
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
