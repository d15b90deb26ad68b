"""Issue 38's button, value and lock defects on a bot of two clusters that share job ids and node
names (tests/support/two_cluster_bot.py): each is a test that failed on the code before the fix.

The generated test over every command and button is tests/test_every_button_on_its_cluster.py.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path

from core.buttons.cancel import job_button_of
from handlers.buttons import move_to_overcap
from handlers.clicks import Click
from handlers.commands import command_table
from handlers.home import home_view
from store.alerts import save_starts_wanted
from tests.support.two_cluster_bot import (
    ALICE,
    TEAM,
    TwoClusterBot,
    alices_jobs,
    buttons,
    cluster_named,
    two_cluster_bot,
)


async def test_move_to_overcap_under_why_on_nova_moves_novas_job_only(tmp_path: Path) -> None:
    async with two_cluster_bot(tmp_path) as bot:
        reply = await bot.ask("why 7 --cluster nova")
        (move,) = buttons(reply.blocks)
        # Before: the value was `7`, and the click moved skynet's job 7 through skynet's runner.
        assert move["value"] == "nova/7"
        answer = await bot.click(move)
        assert "`nova-train`" in answer.notice and "Moved job" in answer.notice
        (call,) = bot.runner_calls()
        assert call["request"]["action"] == "move-to-overcap"
        assert call["request"]["cluster"] == "nova"


async def failure_and_start_dms(bot: TwoClusterBot, cluster: str) -> list[dict[str, object]]:
    """Job 7 starts and job 8 fails on `cluster`; the DMs alice is sent about it."""
    await bot.writer.run(save_starts_wanted, TEAM, ALICE, True, 0.0)
    now = time.time()
    seven, eight, nine = alices_jobs(cluster, now)
    started = replace(seven, state="RUNNING", reason="None", start_time=int(now) - 5)
    failed = replace(eight, state="FAILED", exit_code=1, end_time=int(now) - 2)
    await bot.poll(cluster, [started, nine], [failed], now)
    await bot.wing(cluster).watchers.after_slurm_poll()
    rows = await bot.writer.run(lambda db: list(db.query("SELECT * FROM outbox ORDER BY id")))
    return [row for row in rows if f":{cluster}:" in row["key"]]


def _blocks(row: dict[str, object]) -> list[dict[str, object]]:
    import json

    return json.loads(str(row["blocks"])) if row["blocks"] else []


async def test_a_start_dms_show_log_names_its_cluster_and_reads_there(tmp_path: Path) -> None:
    async with two_cluster_bot(tmp_path) as bot:
        dms = await failure_and_start_dms(bot, "nova")
        start = next(row for row in dms if str(row["key"]).startswith("jobstart:nova:7:"))
        (show_log,) = buttons(_blocks(start))  # type: ignore[arg-type]
        # Before: `skybot_log_more:7:out`, read on skynet (whose job 7 is another job).
        assert cluster_named(show_log) == "nova"
        answer = await bot.click(show_log)  # type: ignore[arg-type]
        assert "Latest output of job 7 `nova-train`" in answer.notice
        assert bot.runner_calls()[-1]["request"]["cluster"] == "nova"


async def test_show_more_and_show_log_work_on_every_cluster_of_several(tmp_path: Path) -> None:
    async with two_cluster_bot(tmp_path) as bot:
        for cluster in ("skynet", "nova"):
            dms = await failure_and_start_dms(bot, cluster)
            failure = next(row for row in dms if "FAILED" in str(row["key"]))
            (more,) = buttons(_blocks(failure))  # type: ignore[arg-type]
            answer = await bot.click(more)  # type: ignore[arg-type]
            # Before: "That button does not name a job's output skybot can show." (the
            # registry stripped `CLUSTER/` from the value but not from the action id).
            assert answer.notice.startswith(f"Earlier output of job 8 `{cluster}-eval`"), (
                cluster,
                answer.notice,
            )
            # Its own Show more names the cluster too, and works again.
            (again,) = buttons(answer.blocks)
            assert cluster_named(again) == cluster
            assert "does not name" not in (await bot.click(again)).notice


async def test_a_cluster_skybot_does_not_act_on_offers_no_action_buttons(tmp_path: Path) -> None:
    async with two_cluster_bot(tmp_path, nova_actions="") as bot:
        jobs = await bot.ask("jobs --cluster nova")
        # Before: Cancel buttons whose dialog promised "scancel, as you".
        assert buttons(jobs.blocks) == []
        assert "scancel" not in str(jobs.blocks)
        why = await bot.ask("why 7 --cluster nova")
        assert buttons(why.blocks) == [] and "Move to overcap" not in why.text
        # skynet, where skybot acts, offers both.
        assert len(buttons((await bot.ask("jobs --cluster skynet")).blocks)) == 2
        assert len(buttons((await bot.ask("why 7 --cluster skynet")).blocks)) == 1


async def test_a_failure_dm_on_such_a_cluster_says_the_log_is_not_read_there(
    tmp_path: Path,
) -> None:
    async with two_cluster_bot(tmp_path, nova_actions="") as bot:
        dms = await failure_and_start_dms(bot, "nova")
        failure = next(row for row in dms if "FAILED" in str(row["key"]))
        # Before: "*Output* `…`: not shown: skybot reads nova through slurmrestd and does not
        # act there: use sbatch/scancel on nova's login node."
        assert "does not act there" not in str(failure["text"])
        assert "skybot does not read job output on `nova`" in str(failure["text"])
        assert buttons(_blocks(failure)) == []  # type: ignore[arg-type]
        start = next(row for row in dms if str(row["key"]).startswith("jobstart:"))
        assert buttons(_blocks(start)) == []  # type: ignore[arg-type]
        assert bot.runner_calls() == []


async def test_the_one_action_at_a_time_lock_is_per_cluster(tmp_path: Path) -> None:
    async with two_cluster_bot(tmp_path, cancel_seconds=0.5) as bot:
        on_skynet = buttons((await bot.ask("jobs --cluster skynet")).blocks)
        on_nova = buttons((await bot.ask("jobs --cluster nova")).blocks)
        cancel_7 = [b for b in on_skynet + on_nova if job_button_of(b["value"]).label == "7"]  # type: ignore[union-attr]
        skynet, nova = await asyncio.gather(*(bot.click(b) for b in cancel_7))
        # Before: nova's click joined skynet's scancel of "7" and answered with its outcome.
        assert "`skynet-train`" in skynet.notice and "`nova-train`" in nova.notice
        sent = sorted(str(c["request"].get("cluster")) for c in bot.runner_calls())
        assert sent == ["None", "nova"]
        # What was just cancelled is remembered per cluster too: a second click on nova's
        # is answered from memory, skynet's job 8 is not taken for cancelled.
        assert "`nova-train`" in (await bot.click(cancel_7[1])).notice
        assert len(bot.runner_calls()) == 2


async def test_the_home_tab_takes_only_the_cancelled_clusters_job_for_going(
    tmp_path: Path,
) -> None:
    async with two_cluster_bot(tmp_path) as bot:
        on_skynet = buttons((await bot.ask("jobs --cluster skynet")).blocks)
        cancel_skynet_7 = next(b for b in on_skynet if b["value"] == "skynet/7")
        await bot.click(cancel_skynet_7)
        desks = bot.desks.all()
        services = desks[0].services
        assert services is not None
        home = await home_view(
            desks[0].view(), services, command_table(), TEAM, ALICE, time.time(), None,
            [(d.name, d.view()) for d in desks],
        )  # fmt: skip
        values = [e["value"] for b in home["blocks"] if b["type"] == "actions"
                  for e in b["elements"]]  # fmt: skip
        # Before: nova's job 7 was listed as being cancelled, without its Cancel button.
        assert values == ["skynet/8", "nova/8", "nova/7"]


def test_a_failed_move_click_says_the_command_for_its_cluster() -> None:
    click = Click(TEAM, ALICE, "skybot_move_to_overcap:nova/7", "nova/7", True)
    # Before: "`/sky why nova/7` shows where the job is", which is no job id.
    assert "`/sky why 7 --cluster nova`" in move_to_overcap.BUTTON.failed(click)
    legacy = Click(TEAM, ALICE, "skybot_move_to_overcap:7", "7", True)
    assert "`/sky why 7`" in move_to_overcap.BUTTON.failed(legacy)
