"""skybot's poll schedule as `skybot run` builds it, over polls a test stands in."""

from __future__ import annotations

from typing import Any

from bot.config import Config
from bot.polling import poll_jobs
from scheduler.schedule import AfterPoll, PollHooks, PollSchedule, build_schedule


async def _refresh() -> None:
    return None


def schedule_for(
    config: Config, polls: Any, refresh: AfterPoll = _refresh, storage: Any = None, **hooks: Any
) -> PollSchedule:
    """skybot's polls as `skybot run` lists them; `polls` stands in for the storage poller too
    unless `storage` is given."""
    hooks.setdefault("grace_seconds", config.slurm.command_timeout_seconds)
    hooks.setdefault("close_pollers", polls.close)
    jobs = poll_jobs(
        config.default_cluster, config, polls, polls if storage is None else storage, refresh
    )
    return build_schedule(jobs, PollHooks(**hooks))
