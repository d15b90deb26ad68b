"""Reservations in answers and in the alert channel (issue 43): `/sky free` and `/sky gpus` say
which idle GPUs are reserved, and a maintenance window is announced once, across restarts."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bot.config import load_config
from core.slurm_limits import Reservation, SlurmLimits
from core.snapshot import SourceStatus
from core.view import ClusterView
from scheduler.watchers.reservations import announce_reservations
from store.limits import load_limits
from store.outbox import outbox_rows
from store.writer import StoreWriter
from tests.support.asking import ask
from tests.support.factories import CLUSTER, make_view
from tests.support.sample_cluster import NOW, cluster

MAINT = Reservation("maint_dec", int(NOW - 60), int(NOW + 3600), ("clippy",), ("MAINT",))
LATER = Reservation("later", int(NOW + 7200), int(NOW + 9000), ("xaea-12",), ())


def _view_with(*reservations: Reservation) -> ClusterView:
    snapshot = cluster().snapshot
    return make_view(replace(snapshot, limits=SlurmLimits(reservations=reservations)))


def test_free_says_which_idle_gpus_are_reserved_now_or_soon() -> None:
    text = ask("free", _view_with(MAINT, LATER)).text
    [clippy] = [line for line in text.splitlines() if "`clippy`" in line]
    assert "reserved: `maint_dec` (maintenance) until" in clippy
    [xaea] = [line for line in text.splitlines() if "`xaea-12`" in line]
    assert "reserved from" in xaea and "only jobs that end before it" in xaea
    plain = ask("free", cluster()).text
    assert "reserved" not in plain


def test_gpus_counts_the_idle_gpus_on_reserved_nodes() -> None:
    text = ask("gpus hoffman-lab", _view_with(MAINT)).text
    # clippy has 3 of its 8 a40s idle (test_commands' cluster).
    assert "(3 GPUs of them on reserved nodes" in text
    assert "reserved" not in ask("gpus hoffman-lab", cluster()).text


async def _announce(path: Path, reservations: tuple[Reservation, ...]) -> int:
    """One bot's life: open the database, announce what the limits poll saw, close."""
    config = load_config(None)
    writer = StoreWriter(path)
    try:
        view = cluster()
        status = {**view.snapshot.status, "limits": SourceStatus("limits", NOW)}
        snapshot = replace(
            view.snapshot, status=status, limits=SlurmLimits(reservations=reservations)
        )
        return await announce_reservations(
            writer, config, make_view(snapshot), config.default_cluster
        )
    finally:
        writer.close()


async def test_a_maintenance_window_is_announced_once_across_restarts(tmp_path: Path) -> None:
    path = tmp_path / "skybot.db"
    upcoming = Reservation(
        "maint_dec", 4_000_000_000, 4_000_003_600, ("clippy", "baymax"), ("MAINT",)
    )
    assert await _announce(path, (upcoming, LATER)) == 1  # LATER is no maintenance
    assert await _announce(path, (upcoming,)) == 0  # the next poll
    assert await _announce(path, (upcoming,)) == 0  # after a restart
    writer = StoreWriter(path)
    rows = await writer.run(outbox_rows)
    writer.close()
    [row] = rows
    assert row["key"] == f"reservation:{CLUSTER}:maint_dec:4000000000"
    assert "`maint_dec`" in row["text"] and "`clippy`, `baymax`" in row["text"]
    assert "from " in row["text"] and " to " in row["text"]
    # Moved to another window, it is news again.
    moved = Reservation("maint_dec", 4_000_086_400, 4_000_090_000, ("clippy",), ("MAINT",))
    assert await _announce(path, (moved,)) == 1


async def test_limits_before_the_first_poll_are_empty(tmp_path: Path) -> None:
    writer = StoreWriter(tmp_path / "skybot.db")
    try:
        assert await writer.run(load_limits, CLUSTER) == SlurmLimits()
    finally:
        writer.close()


def test_answers_warn_when_the_limits_they_quote_are_failing() -> None:
    view = _view_with(MAINT)
    failing = SourceStatus("limits", NOW - 900, "scontrol exited with status 1", NOW - 600)
    snapshot = replace(view.snapshot, status={**view.snapshot.status, "limits": failing})
    text = ask("free", make_view(snapshot)).text
    assert "Reading Slurm's partition and QOS limits and reservations failed for 10 min" in text
