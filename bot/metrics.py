"""Prometheus metrics and a health endpoint, served from the bot's own event loop.

Durations are observed where the work happens (each poll, each command); everything that is
state (snapshot age, failing sources, outbox and submission counts) is read at scrape time
from the snapshot and the store, so the figures cannot drift from what skybot really holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import sqlite_utils
from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from core.view import ClusterView
from store.writer import StoreWriter

_FAST = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_POLL = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 60.0)


class Metrics:
    """One registry per bot, so two bots in one process (tests) keep separate figures."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.poll_seconds = Histogram(
            "skybot_poll_duration_seconds",
            "Time one poll took, by source.",
            ["source"],
            buckets=_POLL,
            registry=self.registry,
        )
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
        self.snapshot_age = Gauge(
            "skybot_snapshot_age_seconds",
            "Age of the last good snapshot, by source.",
            ["source"],
            registry=self.registry,
        )
        self.source_failing = Gauge(
            "skybot_source_failing",
            "1 while the last poll of a source failed.",
            ["source"],
            registry=self.registry,
        )
        self.outbox = Gauge(
            "skybot_outbox_messages",
            "Outbox messages by state (queued, sent, parked).",
            ["state"],
            registry=self.registry,
        )
        self.submissions = Gauge(
            "skybot_submissions",
            "Chat submissions by state (queued, submitted, failed, …).",
            ["state"],
            registry=self.registry,
        )

    def observe_poll(self, source: str, seconds: float) -> None:
        self.poll_seconds.labels(source).observe(seconds)

    def observe_command(self, command: str, seconds: float) -> None:
        self.commands.labels(command).inc()
        self.command_seconds.observe(seconds)

    async def refresh(self, view: ClusterView, writer: StoreWriter, now: float) -> None:
        for source, status in view.snapshot.status.items():
            if status.taken_at is not None:
                self.snapshot_age.labels(source).set(now - status.taken_at)
            self.source_failing.labels(source).set(1 if status.failing else 0)
        outbox, submissions = await writer.run(_state_counts)
        for state in ("queued", "sent", "parked"):
            self.outbox.labels(state).set(outbox.get(state, 0))
        for state in ("queued", "submitting", "submitted", "failed"):
            self.submissions.labels(state).set(submissions.get(state, 0))


def _state_counts(db: sqlite_utils.Database) -> tuple[dict[str, int], dict[str, int]]:
    outbox = dict(db.execute("SELECT state, COUNT(*) FROM outbox GROUP BY state").fetchall())
    submissions = dict(
        db.execute("SELECT state, COUNT(*) FROM submissions GROUP BY state").fetchall()
    )
    return outbox, submissions


def health(view: ClusterView, now: float, max_age_seconds: float) -> tuple[bool, list[str]]:
    """Healthy while Slurm's snapshot is fresh and its last poll succeeded."""
    problems = []
    slurm = view.snapshot.source("slurm")
    if slurm.taken_at is None:
        problems.append("slurm: no successful poll yet")
    elif now - slurm.taken_at > max_age_seconds:
        problems.append(f"slurm: snapshot is {now - slurm.taken_at:.0f} s old")
    if slurm.failing:
        problems.append(f"slurm: last poll failed: {slurm.error}")
    return not problems, problems


def metrics_app(
    metrics: Metrics,
    view: Callable[[], ClusterView],
    writer: StoreWriter,
    max_age_seconds: float,
) -> web.Application:
    async def scrape(request: web.Request) -> web.Response:
        await metrics.refresh(view(), writer, time.time())
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(request: web.Request) -> web.Response:
        ok, problems = health(view(), time.time(), max_age_seconds)
        return web.json_response({"ok": ok, "problems": problems}, status=200 if ok else 503)

    app = web.Application()
    app.router.add_get("/metrics", scrape)
    app.router.add_get("/healthz", healthz)
    return app
