"""Jobs waiting behind a lab's cap: one DM per user per stretch at the cap, after a while."""

from __future__ import annotations

from pathlib import Path

from msgspec.structs import replace

from bot.config import load_config
from core.cap_waits import cap_wait_notices, next_episodes
from core.lab_usage import lab_usage
from core.records import LabCap
from scheduler.watchers.cap_waits import check_cap_waits
from store.writer import StoreWriter
from tests.support.factories import job, make_snapshot, make_view, node


def _at_cap_jobs() -> list:
    return [
        job(1, user="alice", gpus_by_type={"a40": 4}),
        job(2, user="bob", state="PENDING", reason="AssocGrpGRES", gpus_by_type={"a40": 1}),
        job(3, user="bob", state="PENDING", reason="AssocGrpGRES", gpus_by_type={"": 2}),
    ]


def test_episodes_start_at_the_first_poll_at_cap_and_end_below_it() -> None:
    at_cap = lab_usage("hoffman-lab", "hoffman-lab", 4, _at_cap_jobs())
    under = lab_usage("hoffman-lab", "hoffman-lab", 8, _at_cap_jobs())
    first = next_episodes({}, [at_cap], now=100.0)
    assert first == {"hoffman-lab": 100.0}
    assert next_episodes(first, [at_cap], now=200.0) == {"hoffman-lab": 100.0}
    assert next_episodes(first, [under], now=300.0) == {}


def test_one_notice_per_waiting_user_only_after_the_wait() -> None:
    usage = lab_usage("hoffman-lab", "hoffman-lab", 4, _at_cap_jobs())
    episodes = {"hoffman-lab": 100.0}
    args = ([usage], 1000.0, {"rtx_6000": 3}, "`--partition=overcap --account=overcap`")
    assert cap_wait_notices(episodes, [usage], 100.0 + 1799, 1800, *args[2:]) == []
    notices = cap_wait_notices(episodes, [usage], 100.0 + 1800, 1800, *args[2:])
    assert [(n.user, n.key) for n in notices] == [("bob", "capwait:hoffman-lab:100:bob")]
    text = notices[0].text
    assert "(4/4) for 30 min" in text and "2 of your jobs are waiting" in text
    assert "`2` (`a40:1`)" in text and "`rtx_6000` 3" in text and "`/sky why 2`" in text


class _Directory:
    def slack_users_of(self, cluster_user: str) -> list[tuple[str, str]]:
        return [("T1", f"U{cluster_user.upper()}")]


async def test_watcher_enqueues_once_per_stretch_and_again_after_a_new_one(
    tmp_path: Path,
) -> None:
    config = load_config(None)
    config = replace(config, notifications=replace(config.notifications, cap_wait_minutes=10))
    writer = StoreWriter(tmp_path / "skybot.db")
    at_cap = make_view(
        make_snapshot(
            jobs=tuple(_at_cap_jobs()),
            nodes=(node("clippy", "a40", used=4),),
            caps=(LabCap("hoffman-lab", 4),),
        )
    )
    under = make_view(make_snapshot(jobs=(), caps=(LabCap("hoffman-lab", 4),)))
    directory = _Directory()
    try:
        assert (
            await check_cap_waits(
                writer, directory, config, at_cap, config.default_cluster, now=0.0
            )
            == 0
        )
        assert (
            await check_cap_waits(
                writer, directory, config, at_cap, config.default_cluster, now=599.0
            )
            == 0
        )
        assert (
            await check_cap_waits(
                writer, directory, config, at_cap, config.default_cluster, now=600.0
            )
            == 1
        )
        assert (
            await check_cap_waits(
                writer, directory, config, at_cap, config.default_cluster, now=900.0
            )
            == 0
        )
        await check_cap_waits(writer, directory, config, under, config.default_cluster, now=1000.0)
        await check_cap_waits(writer, directory, config, at_cap, config.default_cluster, now=2000.0)
        assert (
            await check_cap_waits(
                writer, directory, config, at_cap, config.default_cluster, now=2600.0
            )
            == 1
        )
        targets = await writer.run(
            lambda db: [r[0] for r in db.execute("SELECT target FROM outbox ORDER BY id")]
        )
        assert targets == ["UBOB", "UBOB"]
    finally:
        writer.close()
