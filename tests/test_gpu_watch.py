"""GPU watches (`/sky watch`): the pure evaluation, the store, the watcher and the commands."""

from __future__ import annotations

from dataclasses import replace as replace_snapshot
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from bot.config import IdentityConfig, load_config
from core.gpu_watch import (
    EXPIRED,
    FIRED,
    Watch,
    free_index,
    headroom_by_lab,
    parse_duration,
    sbatch_options,
    watch_outcomes,
)
from core.lab_usage import idle_gpus
from core.records import LabCap
from core.snapshot import SourceStatus
from core.view import ClusterView
from handlers.buttons.remove_watch import unwatch_clicked
from handlers.commands import command_table
from handlers.identity import IdentityDirectory
from handlers.services import Services
from scheduler.watchers.gpu_watches import check_gpu_watches
from store.watches import active_watches
from store.writer import StoreWriter
from tests.support.asking import answer_with_services
from tests.support.factories import CLUSTER, job, make_snapshot, make_view, node, watch


def at_cap_view(a40_used: int = 4, lab_used: int = 4) -> ClusterView:
    """hoffman-lab (cap 4) using `lab_used` GPUs, clippy with `a40_used` of 4 a40s busy."""
    jobs = [job(1, user="bob", gpus_by_type={"rtx_6000": lab_used})] if lab_used else []
    if a40_used:
        jobs.append(job(2, user="carol", account="kira-lab", gpus_by_type={"a40": a40_used}))
    return make_view(
        make_snapshot(
            jobs=tuple(jobs),
            nodes=(
                node("clippy", "a40", used=a40_used),
                node("xaea-12", "rtx_6000", used=lab_used),
            ),
            caps=(LabCap("hoffman-lab", 4), LabCap("kira-lab", 4)),
            members={"hoffman-lab": {"alice", "bob"}, "kira-lab": {"carol"}},
        )
    )


def outcomes(view: ClusterView, watches: list[Watch], now: float = 50.0) -> list[tuple[int, str]]:
    index = free_index(view.idle)
    headroom = headroom_by_lab(view)
    return [(o.watch.id, o.kind) for o in watch_outcomes(watches, index, headroom, now)]


def test_a_lab_watch_needs_both_idle_gpus_and_room_under_the_cap() -> None:
    lab_watch, overcap_watch = watch(1), watch(2, overcap=True, partition="overcap")
    # Lab at its cap with a40s idle: only the overcap watch is true.
    assert outcomes(at_cap_view(a40_used=0), [lab_watch, overcap_watch]) == [(2, FIRED)]
    # Room under the cap but the a40s busy: neither.
    assert outcomes(at_cap_view(a40_used=4, lab_used=0), [lab_watch, overcap_watch]) == []
    # Room and idle a40s: both.
    both = outcomes(at_cap_view(a40_used=0, lab_used=2), [lab_watch, overcap_watch])
    assert both == [(1, FIRED), (2, FIRED)]
    # Only one node's idle GPUs count: 1 + 1 on two nodes is not 2 on one.
    split = make_view(make_snapshot(nodes=(node("a", "a40", used=3), node("b", "a40", used=3))))
    assert outcomes(split, [watch(3, overcap=True, partition="overcap")]) == []


def test_no_lab_watch_is_true_before_the_caps_are_read() -> None:
    view = at_cap_view(a40_used=0, lab_used=0)
    status = dict(view.snapshot.status)
    status["caps"] = SourceStatus("caps", None)
    unread = make_view(replace_snapshot(view.snapshot, status=status))
    assert headroom_by_lab(unread) == {}
    assert outcomes(unread, [watch(1), watch(2, overcap=True, partition="overcap")]) == [(2, FIRED)]


def test_free_gpus_are_shared_out_oldest_watch_first_and_expiry_comes_after() -> None:
    view = at_cap_view(a40_used=2, lab_used=0)  # 2 a40s idle, 4 GPUs of headroom
    first, second = watch(1), watch(2, user_id="U2", cluster_user="bob")
    assert outcomes(view, [first, second]) == [(1, FIRED)]
    assert outcomes(view, [second], now=100.0) == [(2, FIRED)]  # free beats expired
    busy = at_cap_view()
    assert outcomes(busy, [first], now=99.9) == []
    assert outcomes(busy, [first], now=100.0) == [(1, EXPIRED)]


def test_durations_and_options() -> None:
    assert parse_duration("4h") == 14400
    assert parse_duration("1h30m") == 5400
    assert parse_duration("20s") == 20
    assert parse_duration("") is None and parse_duration("4 hours") is None
    assert sbatch_options(watch()) == (
        "--partition=hoffman-lab --account=hoffman-lab --nodes=1 --gpus-per-node=a40:2"
    )
    over = watch(overcap=True, partition="overcap", account="overcap")
    assert sbatch_options(over).endswith("--gpus-per-node=a40:2 --requeue")


# ---------------------------------------------------------------- commands, store, watcher


class Bot:
    """The commands and the watcher over one store, with a view the test replaces."""

    def __init__(self, writer: StoreWriter, view: ClusterView) -> None:
        self.view = view
        self.writer = writer
        links = IdentityConfig(links={"T1/U1": "alice", "T1/U2": "bob"})
        config = load_config(None)
        config = replace(config, watches=replace(config.watches, max_per_user=2))
        self.services = Services(
            config,
            IdentityDirectory(links, writer),
            self.no_runner,
            writer=writer,
            view=lambda: self.view,
        )

    @staticmethod
    async def no_runner(user: str, request: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("watches never need the runner")

    async def sky(self, text: str, user: str = "alice", now: float = 10.0) -> str:
        reply = await answer_with_services(
            command_table(), self.view, self.services, text,
            team_id="T1", user_id="U1" if user == "alice" else "U2", cluster_user=user, now=now,
        )  # fmt: skip
        return reply.text

    async def outbox(self) -> list[tuple[str, str]]:
        rows = await self.writer.run(
            lambda db: db.execute("SELECT target, text FROM outbox ORDER BY id").fetchall()
        )
        return [(r[0], r[1]) for r in rows]


async def test_watch_dms_once_when_free_however_the_gpus_come_and_go(writer: StoreWriter) -> None:
    bot = Bot(writer, at_cap_view())
    answer = await bot.sky("watch a40:2")
    assert answer.startswith("👀 Watch #1: I'll DM you once when 2 `a40` GPUs are free under")
    assert await check_gpu_watches(writer, bot.view, CLUSTER, now=20.0) == 0
    bot.view = at_cap_view(a40_used=0, lab_used=0)
    assert await check_gpu_watches(writer, bot.view, CLUSTER, now=30.0) == 1
    bot.view = at_cap_view()
    assert await check_gpu_watches(writer, bot.view, CLUSTER, now=40.0) == 0
    bot.view = at_cap_view(a40_used=0, lab_used=0)
    assert await check_gpu_watches(writer, bot.view, CLUSTER, now=50.0) == 0
    ((target, text),) = await bot.outbox()
    assert target == "U1"
    assert "`sbatch --partition=hoffman-lab --account=hoffman-lab --nodes=1 " in text
    assert "`/sky template --gpus a40:2 --lab hoffman-lab`" in text
    assert await writer.run(active_watches, CLUSTER) == []


async def test_watch_already_true_answers_at_once_and_stores_nothing(writer: StoreWriter) -> None:
    bot = Bot(writer, at_cap_view(a40_used=0, lab_used=0))
    answer = await bot.sky("watch A40:2")
    assert "right now, so there is nothing to watch" in answer
    assert "`sbatch --partition=hoffman-lab --account=hoffman-lab --nodes=1 --gpus" in answer
    assert await writer.run(active_watches, CLUSTER) == []


async def test_expiry_dms_once_and_the_watch_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "skybot.db"
    writer = StoreWriter(path)
    bot = Bot(writer, at_cap_view())
    try:
        assert "for the next 20 s" in await bot.sky("watch a40:2 --for 20s", now=100.0)
    finally:
        writer.close()
    writer = StoreWriter(path)  # skybot restarted
    bot = Bot(writer, at_cap_view())
    try:
        assert [w.id for w in await writer.run(active_watches, CLUSTER)] == [1]
        assert await check_gpu_watches(writer, bot.view, CLUSTER, now=119.0) == 0
        assert await check_gpu_watches(writer, bot.view, CLUSTER, now=120.0) == 1
        assert await check_gpu_watches(writer, bot.view, CLUSTER, now=200.0) == 0
        ((_, text),) = await bot.outbox()
        assert text.startswith("⌛ Your watch #1 for `a40:2` under `hoffman-lab`'s cap")
    finally:
        writer.close()


async def test_list_limit_remove_and_bad_input(writer: StoreWriter) -> None:
    bot = Bot(writer, at_cap_view())
    assert (await bot.sky("watch")).startswith("You have no GPU watches.")
    await bot.sky("watch a40:2")
    await bot.sky("watch rtx_6000:1 --overcap --for 1h")
    assert "already have 2 watches" in await bot.sky("watch a40:1")
    listing = await bot.sky("watch")
    assert "#1: `a40:2` under `hoffman-lab`'s cap" in listing
    assert "#2: `rtx_6000:1` idle on `overcap`" in listing
    # bob can neither remove alice's watch by number nor by her button.
    assert "no active watch #1" in await bot.sky("unwatch 1", user="bob")
    refused = await unwatch_clicked(bot.services, "T1", "U2", "1")
    assert "no active watch #1" in refused.text
    removed = await unwatch_clicked(bot.services, "T1", "U1", "1")
    assert removed.text.startswith("Removed watch #1.")
    assert await bot.sky("unwatch all") == "Removed 1 watch."
    for text, words in [
        ("watch a40:9", "at most 4 GPUs"),
        ("watch h100:1", "no GPU type"),
        ("watch 2", "Give a GPU type"),
        ("watch a40:1 --for 25h", "`--for` must be between"),
        ("watch a40:1 --for soon", "is not a duration"),
        ("watch a40:1 --bogus", "is not something `/sky watch` takes"),
        ("unwatch", "Usage: `/sky unwatch ID|all`"),
    ]:
        assert words in await bot.sky(text), text


@pytest.mark.parametrize("user", ["dave"])
async def test_a_user_with_no_lab_is_told_to_use_overcap(writer: StoreWriter, user: str) -> None:
    bot = Bot(writer, at_cap_view())
    assert "--overcap` watches idle GPUs" in await bot.sky("watch a40:2", user=user)


def test_free_index_keeps_the_emptiest_node_per_partition_and_type() -> None:
    nodes = (node("a", "a40", used=3), node("b", "a40", used=1, partitions=("overcap",)))
    index = free_index(idle_gpus(nodes))
    assert index[("overcap", "a40")].node == "b"
    assert index[("hoffman-lab", "a40")].idle == 1
