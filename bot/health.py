"""Liveness and readiness: two questions, two answers.

- Live (`/livez`, and `/healthz` as its alias): the process and its event loop are alive. The
  loop answers the request itself, and its heartbeat ticked lately. Nothing outside skybot can
  make this fail, so a liveness probe never restarts the bot because Slack or Slurm is down.
- Ready (`/readyz`): skybot is doing its job. The process: connected to Slack (Socket
  Mode), the outbox not paused by a refused token, the database working and still the file
  at its path. Each cluster: its Slurm snapshot fresh and its last poll good, accounting
  (sacct) answering, its pollers completing on time (on the monotonic clock: a wall-clock
  step or a stuck poll is seen whatever the heartbeat says). The answer names each check,
  each cluster's apart, and why it fails; `/readyz?cluster=NAME` asks about one cluster.

Ages are wall-clock differences (the snapshot's time is stored): after the clock is stepped
back they would be negative, so they are never less than 0; that a poll is late is judged on
the monotonic clock instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.slack_link import SocketModeLink
from core.slurm_failure import restd_words
from core.view import ClusterView
from scheduler.outbox_sender import SenderPause
from store.health import StoreHealth

# The order /readyz has always listed its checks in.
CHECK_ORDER = ("slack", "slurm", "accounting", "sender", "pollers", "store", "exactly_once")

# The heartbeat ticks this often; a loop that has not run it for LIVE_SECONDS is not alive.
BEAT_SECONDS = 1.0
LIVE_SECONDS = 30.0


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str


class Heartbeat:
    """A task that wakes every BEAT_SECONDS; how late it wakes is the event loop's lag."""

    def __init__(
        self,
        on_beat: Callable[[], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._on_beat = on_beat
        self._clock = clock
        self.last_beat = clock()
        self.lag_seconds = 0.0

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            expected = self._clock() + BEAT_SECONDS
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), BEAT_SECONDS)
            now = self._clock()
            self.lag_seconds = max(0.0, now - expected)
            self.last_beat = now
            if self._on_beat is not None:
                self._on_beat()

    def alive(self) -> Check:
        age = self._clock() - self.last_beat
        if age > LIVE_SECONDS:
            return Check(False, f"event loop heartbeat is {age:.0f} s old")
        return Check(True, f"event loop lag {self.lag_seconds * 1000:.0f} ms")


@dataclass
class ClusterHealth:
    """One cluster's side of readiness: its snapshot's sources and its polls."""

    name: str
    view: Callable[[], ClusterView]
    # Its Slurm snapshot is stale once older than this.
    max_age_seconds: float
    # Each of its pollers that has not completed on time, in words (scheduler/schedule.py).
    late_polls: Callable[[], list[str]] = list
    # How many times each of its polls was abandoned as stuck and started again.
    restarts: Callable[[], dict[str, int]] = dict

    def readiness(self, now: float) -> dict[str, Check]:
        return {
            "slurm": slurm_check(self.view(), now, self.max_age_seconds),
            "accounting": accounting_check(self.view(), now),
            "pollers": self._pollers(),
        }

    def _pollers(self) -> Check:
        late = self.late_polls()
        return Check(False, "; ".join(late)) if late else Check(True, "every poll on time")


@dataclass
class ServiceStatus:
    """Everything readiness and the metrics read about the running bot: the process's own
    checks (Slack, the sender, the store) and each cluster's (its Slurm, accounting, polls),
    the default cluster first. One cluster's outage fails only its own checks."""

    clusters: list[ClusterHealth]
    sender_pause: Callable[[], SenderPause | None]
    heartbeat: Heartbeat
    # Socket Mode's connection; None in HTTP mode, where Slack comes to us.
    slack: SocketModeLink | None
    store: StoreHealth | None = None
    # Whether one DM per notice holds across a crash (the im:history scope), and why: said,
    # but not unready without it (skybot then sends such a DM again, as documented).
    exactly_once: Callable[[], str] | None = None

    def readiness(self, now: float) -> dict[str, Check]:
        """The process's own checks, whatever cluster is asked about."""
        own = {"slack": self._slack(now), "sender": self._sender(now), "store": self._store()}
        if self.exactly_once is not None:
            own["exactly_once"] = Check(True, self.exactly_once())
        return own

    def report(self, now: float, cluster: str | None = None) -> tuple[bool, dict[str, Any]]:
        """(ready, /readyz's body). `checks`: the process's and the default cluster's (or
        `cluster`'s), named as a one-cluster bot always named them; `clusters`: every
        cluster's (or only `cluster`'s) checks. Ready while the process's checks and those of
        every cluster (or of `cluster` only) pass: ask per cluster for a probe that one
        cluster's outage does not fail."""
        own = self.readiness(now)
        asked = [c for c in self.clusters if cluster is None or c.name == cluster]
        per_cluster = {c.name: c.readiness(now) for c in asked}
        first = per_cluster[asked[0].name] if asked else {}
        checks = {**own, **first}
        ordered = {name: checks[name] for name in CHECK_ORDER if name in checks}
        clusters = {
            name: {"ready": all(c.ok for c in found.values()), "checks": _said(found)}
            for name, found in per_cluster.items()
        }
        ready = all(c.ok for c in own.values()) and all(v["ready"] for v in clusters.values())
        return ready, {"ready": ready, "checks": _said(ordered), "clusters": clusters}

    def cluster_names(self) -> list[str]:
        return [c.name for c in self.clusters]

    def _store(self) -> Check:
        if self.store is None:
            return Check(True, "no database")
        return Check(not self.store.failing, self.store.describe())

    def _slack(self, now: float) -> Check:
        link = self.slack
        if link is None:
            return Check(True, "HTTP mode: Slack sends requests to us")
        if link.connected:
            return Check(True, "connected over Socket Mode")
        what = "disconnected" if link.ever_connected else "not connected yet"
        return Check(False, f"{what} for {age(now, link.since):.0f} s")

    def _sender(self, now: float) -> Check:
        pause = self.sender_pause()
        if pause is None:
            return Check(True, "sending")
        return Check(
            False,
            f"paused for {age(now, pause.since):.0f} s: Slack refuses the token ({pause.error})",
        )


def _said(checks: dict[str, Check]) -> dict[str, dict[str, Any]]:
    return {name: {"ok": c.ok, "detail": c.detail} for name, c in checks.items()}


def age(now: float, then: float) -> float:
    """Seconds from `then` to `now`, both wall-clock times: never negative, whatever the
    clock did in between."""
    return max(0.0, now - then)


def slurm_check(view: ClusterView, now: float, max_age_seconds: float) -> Check:
    """Fresh while Slurm's last poll succeeded and its snapshot is younger than the limit."""
    slurm = view.snapshot.source("slurm")
    problems = []
    if slurm.taken_at is None:
        problems.append("no successful poll yet")
    elif age(now, slurm.taken_at) > max_age_seconds:
        problems.append(f"snapshot is {age(now, slurm.taken_at):.0f} s old")
    if slurm.failing:
        since = f" for {age(now, slurm.error_at):.0f} s" if slurm.error_at is not None else ""
        # slurmrestd's own failures name slurmrestd, not slurmctld (core/slurm_failure.py).
        part = restd_words(slurm.error or "") or "the controller (slurmctld) has not answered"
        problems.append(f"{part}{since}: {slurm.error}")
    if problems:
        return Check(False, "; ".join(problems))
    return Check(True, f"snapshot is {age(now, slurm.taken_at or now):.0f} s old")


def accounting_check(view: ClusterView, now: float) -> Check:
    """sacct's side on its own: while slurmdbd is down the live view stays current, but job
    ends (and their DMs) wait until it answers again."""
    accounting = view.snapshot.source("accounting")
    if accounting.failing:
        since = (
            f" for {age(now, accounting.error_at):.0f} s" if accounting.error_at is not None else ""
        )
        return Check(
            False,
            f"accounting (slurmdbd) has not answered{since}: finished jobs may be reported "
            f"late ({accounting.error})",
        )
    if accounting.taken_at is None:
        return Check(False, "no successful sacct poll yet")
    return Check(True, f"sacct answered {age(now, accounting.taken_at):.0f} s ago")
