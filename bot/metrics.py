"""Prometheus metrics, liveness and readiness, served from the bot's own event loop.

Durations and outcomes are observed where the work happens (each poll, each command, each
Slack send); everything that is state (snapshot age, failing sources, outbox and submission
counts, parked messages by reason, the Slack connection, a paused sender) is read at scrape
time from the snapshot, the store and the running parts, so the figures cannot drift from
what skybot really holds. The registry also carries the standard process_* and python_*
collectors.
"""

from __future__ import annotations

import re
import time
from typing import Any

import sqlite_utils
from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from bot.health import Check, ServiceStatus, age
from store.health import is_store_fault
from store.outbox import outbox_counts, parked_error_counts
from store.submissions import submission_counts
from store.writer import StoreWriter

_FAST = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_POLL = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 60.0)


class Metrics:
    """One registry per bot, so two bots in one process (tests) keep separate figures."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # The standard collectors, as on the default registry (process_*, python_*).
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.commands = Counter(
            "skybot_commands",
            "Slash commands answered, by subcommand.",
            ["command"],
            registry=self.registry,
        )
        self.command_seconds = Histogram(
            "skybot_command_duration_seconds",
            "Time from receiving a command to its answer.",
            buckets=_FAST,
            registry=self.registry,
        )
        self._add_work_metrics(self.registry)
        self._add_outbox_gauges(self.registry)
        self._add_health_gauges(self.registry)

    def _add_work_metrics(self, registry: CollectorRegistry) -> None:
        """Durations and counts, observed where the work happens."""
        self.poll_seconds = Histogram(
            "skybot_poll_duration_seconds",
            "Time one poll took, by cluster and source.",
            ["cluster", "source"],
            buckets=_POLL,
            registry=registry,
        )
        self.poll_interval = Gauge(
            "skybot_poll_interval_seconds",
            "The interval polls run at, by cluster and source (the Slurm poll's stretches while "
            "polls are expensive: slurm.max_poll_share).",
            ["cluster", "source"],
            registry=registry,
        )
        self.sends = Counter(
            "skybot_slack_sends",
            "Outbox sends to Slack by result: ok, ratelimited, Slack's error code, http_5xx, "
            "network_error, chart_unavailable.",
            ["result"],
            registry=registry,
        )
        self.slack_connections = Counter(
            "skybot_slack_connections",
            "Socket Mode connections established (the first one and every reconnect).",
            registry=registry,
        )

    def _add_outbox_gauges(self, registry: CollectorRegistry) -> None:
        """The outbox and submissions, counted in the store at scrape time."""
        self.outbox = Gauge(
            "skybot_outbox_messages",
            "Outbox messages by state (queued, sent, parked).",
            ["state"],
            registry=registry,
        )
        self.submissions = Gauge(
            "skybot_submissions",
            "Chat submissions by state (queued, submitted, failed, …).",
            ["state"],
            registry=registry,
        )
        self.parked = Gauge(
            "skybot_outbox_parked_messages",
            "Parked outbox messages by reason (Slack's error code, or chart).",
            ["reason"],
            registry=registry,
        )
        self.sender_paused = Gauge(
            "skybot_outbox_sender_paused",
            "1 while Slack refuses the bot token and the outbox is paused.",
            registry=registry,
        )

    def _add_health_gauges(self, registry: CollectorRegistry) -> None:
        """Sources, store, Slack and the event loop, read at scrape time."""
        self.snapshot_age = Gauge(
            "skybot_snapshot_age_seconds",
            "Age of the last good snapshot, by cluster and source.",
            ["cluster", "source"],
            registry=registry,
        )
        self.source_failing = Gauge(
            "skybot_source_failing",
            "1 while the last poll of a source failed, by cluster and source.",
            ["cluster", "source"],
            registry=registry,
        )
        self.store_failing = Gauge(
            "skybot_store_failing",
            "1 while the database fails (disk full, read-only, I/O error) or its file was "
            "deleted or replaced under the running bot.",
            registry=registry,
        )
        self.slack_connected = Gauge(
            "skybot_slack_connected",
            "1 while the Socket Mode connection to Slack is up (HTTP mode: always 1).",
            registry=registry,
        )
        self.ready = Gauge(
            "skybot_ready",
            "1 while the readiness check passes, by check: slack, sender, store and "
            'exactly_once (always 1, its detail on /readyz) with cluster "", and each '
            "cluster's slurm, accounting and pollers.",
            ["check", "cluster"],
            registry=registry,
        )
        self.poll_restarts = Gauge(
            "skybot_poll_restarts",
            "Times a poll was abandoned as stuck and started again, by cluster and source.",
            ["cluster", "source"],
            registry=registry,
        )
        self.loop_lag = Gauge(
            "skybot_event_loop_lag_seconds",
            "How late the event loop ran its last 1 s heartbeat.",
            registry=registry,
        )

    def observe_poll_interval(self, source: str, cluster: str, seconds: float) -> None:
        self.poll_interval.labels(cluster, source).set(seconds)

    def observe_poll(self, source: str, cluster: str, seconds: float) -> None:
        self.poll_seconds.labels(cluster, source).observe(seconds)

    def observe_command(self, command: str, seconds: float) -> None:
        """One answered command: `command` is the command table's name or "unknown"."""
        self.commands.labels(command).inc()
        self.command_seconds.observe(seconds)

    def observe_send(self, result: str) -> None:
        self.sends.labels(result).inc()

    def observe_slack_connected(self) -> None:
        self.slack_connections.inc()

    async def refresh(
        self, status: ServiceStatus, writer: StoreWriter, now: float
    ) -> dict[str, Check]:
        """Bring every state gauge up to date; returns the readiness checks it read."""
        for cluster in status.clusters:
            for source, poll in cluster.view().snapshot.status.items():
                if poll.taken_at is not None:
                    self.snapshot_age.labels(cluster.name, source).set(age(now, poll.taken_at))
                self.source_failing.labels(cluster.name, source).set(1 if poll.failing else 0)
            for poll_name, count in cluster.restarts().items():
                self.poll_restarts.labels(cluster.name, poll_name.partition("@")[0]).set(count)
        try:
            await self._refresh_counts(writer)
        except Exception as error:
            # A failing database keeps its last counts; skybot_store_failing says why.
            if not is_store_fault(error):
                raise
        self.store_failing.set(1 if writer.health.failing else 0)
        self.sender_paused.set(0 if status.sender_pause() is None else 1)
        self.slack_connected.set(1 if status.slack is None or status.slack.connected else 0)
        self.loop_lag.set(status.heartbeat.lag_seconds)
        checks = status.readiness(now)
        for name, check in checks.items():
            self.ready.labels(name, "").set(1 if check.ok else 0)
        for cluster in status.clusters:
            for name, check in cluster.readiness(now).items():
                self.ready.labels(name, cluster.name).set(1 if check.ok else 0)
        return checks

    async def _refresh_counts(self, writer: StoreWriter) -> None:
        outbox, submissions, parked = await writer.run(_state_counts)
        for state in ("queued", "sent", "parked"):
            self.outbox.labels(state).set(outbox.get(state, 0))
        for state in ("queued", "submitting", "submitted", "failed"):
            self.submissions.labels(state).set(submissions.get(state, 0))
        self.parked.clear()  # a reason whose messages were requeued or pruned disappears
        for reason, count in parked.items():
            self.parked.labels(reason).set(count)


# "channel_not_found", "missing_scope (gave up after retries)", "chart: lab gone" → the code.
_REASON = re.compile(r"[A-Za-z0-9_]+")


def parked_reason(last_error: str | None) -> str:
    match = _REASON.match(last_error or "")
    return match.group(0) if match else "unknown"


def _state_counts(
    db: sqlite_utils.Database,
) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    parked: dict[str, int] = {}
    for error, count in parked_error_counts(db).items():
        reason = parked_reason(error)
        parked[reason] = parked.get(reason, 0) + count
    return outbox_counts(db), submission_counts(db), parked


def metrics_app(metrics: Metrics, status: ServiceStatus, writer: StoreWriter) -> web.Application:
    async def scrape(request: web.Request) -> web.Response:
        await metrics.refresh(status, writer, time.time())
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def livez(request: web.Request) -> web.Response:
        # Answered by the event loop itself: a wedged loop answers nothing, and times out.
        alive = status.heartbeat.alive()
        return web.json_response(
            {"alive": alive.ok, "detail": alive.detail}, status=200 if alive.ok else 503
        )

    async def readyz(request: web.Request) -> web.Response:
        # /readyz?cluster=NAME: the process and that cluster only (a per-cluster probe).
        cluster = request.query.get("cluster")
        if cluster is not None and cluster not in status.cluster_names():
            known = ", ".join(status.cluster_names())
            body: dict[str, Any] = {"error": f"no cluster called {cluster!r}; clusters: {known}"}
            return web.json_response(body, status=404)
        ready, body = status.report(time.time(), cluster)
        return web.json_response(body, status=200 if ready else 503)

    app = web.Application()
    app.router.add_get("/metrics", scrape)
    app.router.add_get("/livez", livez)
    app.router.add_get("/readyz", readyz)
    # Older probes point here: it means "alive", so it never restarts the bot for an outage.
    app.router.add_get("/healthz", livez)
    return app
