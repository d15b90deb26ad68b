"""`/sky watch` end to end: real jobs on the test cluster, the real bot, the Slack stand-in.

hoffman-lab is capped at 4 GPUs. bob holds all 4 (rtx_6000 on xaea-12) while the a40s on
clippy sit idle: alice's `a40:2` watch is not true (no room under the cap), her overcap
watch is (answered at once). A short watch expires with one DM. skybot restarts and keeps
the watch; bob's job ends; alice gets one DM within two polls, and its sbatch options, run
as alice, start a job on a40s at once.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from pathlib import Path

import pytest
import sqlite_utils
from msgspec.structs import replace

from store.snapshots import load_source_status
from tests.support.bot_process import (
    SLACK_IDS,
    TEAM,
    linked_bot_config,
    linked_users,
    running_bot,
    wait_for_slurm_poll,
    wait_for_slurm_polls_acted_on,
)
from tests.support.cluster import (
    as_user,
    sbatch_async,
    scancel_async,
    squeue_json,
    squeue_state,
    wait_for,
)
from tests.support.factories import CLUSTER
from tests.support.slack_standin import SlackStandIn

pytestmark = pytest.mark.cluster

ALICE = SLACK_IDS["alice"]


async def sky(slack: SlackStandIn, text: str) -> str:
    answer = await slack.slash_command_answer(
        command="/sky", text=text, user_id=ALICE, team_id=TEAM, channel_id="D0ALICE", timeout=10
    )
    return str(answer["text"])


def watch_dms(slack: SlackStandIn) -> list[str]:
    """Alice's DMs about her watches."""
    channels = (ALICE, slack.dm_channel_for(ALICE))
    return [
        str(call.params.get("text"))
        for call in slack.calls_to("chat.postMessage")
        if call.ok
        and call.params.get("channel") in channels
        and "watch #" in str(call.params.get("text"))
    ]


def stored_poll(database: str, source: str = "slurm") -> float | None:
    """When the bot's last stored poll of `source` started, read-only from its database."""
    try:
        connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        try:
            return load_source_status(sqlite_utils.Database(connection), CLUSTER, source).taken_at
        finally:
            connection.close()
    except sqlite3.OperationalError:
        return None


async def bot_ready(slack: SlackStandIn, database: str) -> None:
    """Connected, with Slurm's and the caps' polls stored and acted on."""
    await slack.wait_for_socket_connection(timeout=15)
    await wait_for(lambda: stored_poll(database, "caps"), 30, "the caps poll", 0.1)
    await wait_for_slurm_poll(database, acted_on=True)


def job_row(job_id: int) -> dict[str, object] | None:
    return next((j for j in squeue_json()["jobs"] if j["job_id"] == job_id), None)


@pytest.mark.lane_only
@pytest.mark.timeout(300)
async def test_a40_watch_at_the_cap_dms_once_after_a_restart_and_its_options_run(
    tmp_path: Path, clean_queue: None
) -> None:
    config = linked_bot_config(tmp_path)
    # The short watch below lasts 3 s (10 s is the shortest --for by default): its expiry is
    # what is checked, not how long it lasted.
    config = replace(config, watches=replace(config.watches, min_seconds=3.0))
    bob = await sbatch_async(
        "bob", "--chdir=/tmp", "-p", "hoffman-lab", "-A", "hoffman-lab",
        "--gpus-per-node=rtx_6000:4", "-J", "bob-holds-the-cap", "--wrap", "sleep 600",
    )  # fmt: skip
    await wait_for(lambda: squeue_state(bob) == "RUNNING", 30, "bob's job to run")
    async with SlackStandIn(users=linked_users()) as slack:
        async with running_bot(config, slack):
            await bot_ready(slack, config.database.path)
            # Free right now on overcap: answered at once, nothing stored.
            at_once = await sky(slack, "watch a40:2 --overcap")
            assert "right now, so there is nothing to watch" in at_once, at_once
            assert "--partition=overcap" in at_once
            made = await sky(slack, "watch a40:2")
            assert made.startswith("👀 Watch #1:"), made
            short = await sky(slack, "watch 2080_ti:1 --for 3s")
            assert short.startswith("👀 Watch #2:"), short
            await wait_for(lambda: watch_dms(slack), 30, "the short watch to expire")
            (expired,) = watch_dms(slack)
            assert expired.startswith("⌛ Your watch #2 for `2080_ti:1`"), expired
        # skybot restarts: the a40 watch is still there.
        async with running_bot(config, slack):
            await bot_ready(slack, config.database.path)
            listing = await sky(slack, "watch")
            assert "#1: `a40:2` under `hoffman-lab`'s cap" in listing, listing
            assert len(watch_dms(slack)) == 1  # the a40s are idle, but the cap is full
            await scancel_async(str(bob))
            await wait_for(lambda: job_row(bob) is None or squeue_state(bob) not in (
                "RUNNING", "COMPLETING"), 30, "bob's job to end")  # fmt: skip
            # Count the polls the bot stores from here until the DM is sent: at most two.
            polls: set[float] = set()

            def dm_sent() -> bool:
                if (taken_at := stored_poll(config.database.path)) is not None:
                    polls.add(taken_at)
                return len(watch_dms(slack)) == 2

            before = stored_poll(config.database.path)
            await wait_for(dm_sent, 30, "alice's watch DM", 0.05)
            polls.discard(before or 0.0)
            # More polls: nothing more may come.
            await wait_for_slurm_polls_acted_on(config.database.path, 3)
            await asyncio.sleep(1)
    dms = watch_dms(slack)
    assert len(dms) == 2, dms
    fired = dms[1]
    assert len(polls) <= 2, f"the DM came {len(polls)} polls after bob's job ended"
    assert fired.startswith("🟢 2 `a40` GPUs are free under `hoffman-lab`'s cap"), fired
    assert "`/sky template --gpus a40:2 --lab hoffman-lab`" in fired
    options = re.search(r"`sbatch (.+?) job\.sh`", fired)
    assert options is not None, fired
    out = as_user(
        "alice", "sbatch", "--parsable", "--chdir=/tmp", *options[1].split(), "--wrap", "sleep 60"
    )
    job_id = int(out.strip().split(";")[0])
    started = await wait_for(lambda: squeue_state(job_id) == "RUNNING", 10, "alice's job to run")
    assert started
    row = job_row(job_id)
    assert row is not None and row["nodes"] == "clippy", row
    await scancel_async(str(job_id))
