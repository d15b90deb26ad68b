"""The change probe between polls, on a 24.11-like squeue (tests/test_poll_states_only.py's
stand-in): states only, compared with the committed poll; a change calls `on_change`."""

from __future__ import annotations

import json
from pathlib import Path

from scheduler.slurm.poller import SlurmPoller
from store.writer import StoreWriter
from tests.support.fake_squeue import _calls, _config, _set_state, _slurm


async def test_the_probe_reads_states_only_and_tells_a_change(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    _slurm(bin_dir)
    writer = StoreWriter(tmp_path / "skybot.db")
    config = _config(tmp_path, bin_dir)
    poller = SlurmPoller(config.default_cluster, config, writer)
    told: list[None] = []
    poller.on_change = lambda: told.append(None)
    try:
        # Nothing committed yet: nothing to compare with, so nothing asked.
        assert not await poller.probe()
        assert await poller.poll_jobs()
        _calls(bin_dir)
        poller._next_cycle_at = 0.0  # as if the poll had cost nothing

        assert not await poller.probe()
        poller._next_probe_at = 0.0  # and the probe too
        assert _calls(bin_dir) == ["--all --only-job-state --json"]
        assert told == []

        document = json.loads((bin_dir / "squeue.json").read_text())
        job = next(j["job_id"] for j in document["jobs"] if not j["array_job_id"]["number"])
        _set_state(document, job, "COMPLETED")
        (bin_dir / "squeue.json").write_text(json.dumps(document))
        assert await poller.probe()
        assert told == [None]
        # Only states were read: the full read is the poll's, which on_change brings forward.
        assert _calls(bin_dir) == ["--all --only-job-state --json"]
    finally:
        await poller.close()
        writer.close()


async def test_no_probe_before_the_last_polls_cost_allows(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    _slurm(bin_dir)
    writer = StoreWriter(tmp_path / "skybot.db")
    now = [1000.0]
    config = _config(tmp_path, bin_dir)
    poller = SlurmPoller(config.default_cluster, config, writer, monotonic=lambda: now[0])
    try:
        assert await poller.poll_jobs()
        _calls(bin_dir)
        # A poll that took 1 s, at max_poll_share 0.25: no probe for 4 s after it started.
        poller._next_cycle_at = now[0] + 1.0 / 0.25
        now[0] += 3.9
        assert not await poller.probe()
        assert (bin_dir / "calls.log").read_text() == ""
        now[0] += 0.2
        assert not await poller.probe()
        assert _calls(bin_dir) == ["--all --only-job-state --json"]
    finally:
        await poller.close()
        writer.close()


async def test_no_probe_before_the_last_probes_cost_allows(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    _slurm(bin_dir)
    writer = StoreWriter(tmp_path / "skybot.db")
    now = [1000.0]
    config = _config(tmp_path, bin_dir)
    poller = SlurmPoller(config.default_cluster, config, writer, monotonic=lambda: now[0])
    asked: list[float] = []

    async def half_a_second(spool: Path) -> bool:
        asked.append(now[0])
        now[0] += 0.5
        return False

    try:
        assert await poller.poll_jobs()
        poller._reads.changed = half_a_second  # type: ignore[method-assign]
        assert not await poller.probe()
        # It took 0.5 s, at max_poll_share 0.25: the next one 2 s after it started.
        now[0] += 1.4
        assert not await poller.probe()
        now[0] += 0.2
        assert not await poller.probe()
        assert asked == [1000.0, 1002.1]
    finally:
        await poller.close()
        writer.close()
