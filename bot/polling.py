"""What `skybot run` polls, how often, and what follows each poll: a list, so that another
cluster's polls are more entries (scheduler/schedule.py runs it)."""

from __future__ import annotations

from bot.config import Config
from bot.metrics import Metrics
from scheduler.schedule import SLURM_POLL, AfterPoll, PollHooks, PollJob, slurm_pacer
from scheduler.slurm.poller import PROBE_SECONDS, SlurmPoller
from scheduler.storage_poller import StoragePoller
from scheduler.watchers import Watchers
from store.writer import StoreWriter


def poll_jobs(
    config: Config,
    slurm: SlurmPoller,
    storage: StoragePoller,
    refresh: AfterPoll,
    watchers: Watchers | None = None,
) -> list[PollJob]:
    """What skybot polls and how often. After each poll the snapshot cache is refreshed, then
    the watchers run (if given), so they see the snapshot just written."""
    after_slurm = () if watchers is None else (watchers.after_slurm_poll,)
    after_storage = () if watchers is None else (watchers.after_storage_poll,)
    return [
        PollJob(
            SLURM_POLL,
            config.slurm.poll_seconds,
            slurm.poll_jobs,
            (refresh, *after_slurm),
            # The poller plans its listings of pending jobs on the interval.
            pacer=slurm_pacer(config),
            on_interval=slurm.set_interval,
        ),
        # Between polls, "did any job change?", where the source can ask it for almost nothing;
        # on a yes the poll above is brought forward (SlurmPoller.on_change).
        PollJob("slurm-probe", PROBE_SECONDS, slurm.probe),
        PollJob("caps", config.slurm.caps_poll_seconds, slurm.poll_caps, (refresh,)),
        PollJob("storage", config.storage.poll_seconds, storage.poll, (refresh, *after_storage)),
    ]


def poll_hooks(
    config: Config, metrics: Metrics, writer: StoreWriter, slurm: SlurmPoller
) -> PollHooks:
    return PollHooks(
        grace_seconds=config.slurm.command_timeout_seconds,
        observe=metrics.observe_poll,
        observe_interval=metrics.observe_poll_interval,
        after_each=writer.check_file,
        # The Slurm poll worker ends with the polls.
        close_pollers=slurm.close,
    )
