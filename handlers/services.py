"""What action commands (link, submit, cancel, …) may use; read-only commands need none of it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from core.config_schema import Config
from core.rate_limit import RateLimiter
from core.runner_contract import RunnerCall
from core.view import ClusterView
from handlers.click_answers import DmQueue
from handlers.identity import IdentityDirectory
from handlers.job_actions import JobActions
from handlers.request import ChartQueue
from store.writer import StoreWriter


class SubmissionQueue(Protocol):
    def wake(self) -> None:
        """A submission was just recorded: perform it now rather than at the next tick."""


@dataclass
class Services:
    config: Config
    identity: IdentityDirectory
    # Runs a request as a cluster user: bot/runner_client.py, bound by bot/service.py.
    runner: RunnerCall
    # The worker that performs queued submissions (scheduler.submit_worker).
    submissions: SubmissionQueue | None = None
    # The store's writer: submissions, per-user settings (`/sky notify`).
    writer: StoreWriter | None = None
    # Queues `--chart` pictures for the outbox (handlers.charts.ChartRequests).
    queue_charts: ChartQueue | None = None
    # The current snapshot view, for actions that check it (`/sky digest LAB on`).
    view: Callable[[], ClusterView] | None = None
    # Per-user limit on commands that start the runner (handlers.router); None: no limit.
    limiter: RateLimiter | None = None
    # One action per job at a time, shared by every button and command in this process.
    job_actions: JobActions = field(default_factory=JobActions)
    # DMs through the outbox: where an answer goes when its response_url fails.
    dm: DmQueue | None = None

    def current_view(self) -> ClusterView | None:
        return self.view() if self.view is not None else None

    @property
    def cluster_name(self) -> str:
        """The cluster these services act on, as its rows are keyed: `rows_cluster`."""
        return rows_cluster(self.current_view(), self.config)


def rows_cluster(view: ClusterView | None, config: Config) -> str:
    """The name `view`'s cluster's rows (jobs, watches, submissions) are kept under: its own,
    or for a view that names none (tests, tools) the configuration's default cluster's."""
    name = view.cluster_name if view is not None else ""
    return name or config.default_cluster.name
