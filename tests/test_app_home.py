"""The App Home tab end to end: the real bot over Socket Mode publishes each user's page.

No Slurm is touched: slurm.bin_dir points at a directory that does not exist, so the pollers
fail (and record it) while the page is built from a snapshot written into the store first.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from bot.config import (
    Config,
    DatabaseConfig,
    IdentityConfig,
    LabConfig,
    SlurmConfig,
    load_config,
)
from core.job_notices import PREFERENCE_MEANINGS
from core.records import LabCap
from handlers.home import MAX_HOME_BLOCKS, error_view, fit
from handlers.reply import MAX_SECTION_CHARS, section
from store.alerts import save_preference
from store.caps_and_storage import save_caps, save_storage
from store.db import open_db
from store.watches import NewWatch, add_watch
from tests.support.bot_process import running_bot
from tests.support.factories import CLUSTER, directory_usage, filesystem_usage, job
from tests.support.slack_standin import SlackStandIn, SlackUser
from tests.support.slurm_polls import save_slurm_poll

TEAM = "T0STANDIN"
# An hour old: the page must say the data is behind, whatever the pollers do meanwhile.
DATA_AGE_SECONDS = 3600.0
USERS = (SlackUser("UALICE", "alice"), SlackUser("UCAROL", "carol"))


def _config(tmp_path: Path) -> Config:
    base = load_config(None)
    root = str(tmp_path / "srv" / "hoffman-lab" / "flash9")  # does not exist: the scan fails
    return replace(
        base,
        slurm=SlurmConfig(bin_dir=str(tmp_path / "no-slurm"), poll_seconds=60),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
        identity=IdentityConfig(links={f"{TEAM}/UALICE": "alice"}),
        labs=(LabConfig("hoffman-lab", "hoffman-lab", "hoffman-lab", (root,)),),
    )


def _write_snapshot(config: Config) -> None:
    at = time.time() - DATA_AGE_SECONDS
    root = config.labs[0].storage_roots[0]
    running = job(4242, gpus_by_type={"a40": 2}, start_time=int(at) - 600)
    pending = job(4243, state="PENDING", reason="Priority", gpus_by_type={"a40": 1})
    db = open_db(config.database.path)
    try:
        save_slurm_poll(db, [running, pending], [], [], at)
        save_caps(db, CLUSTER, [LabCap("hoffman-lab", 4)], {"hoffman-lab": ["alice", "bob"]}, at)
        directory = directory_usage("alice", 3 * 1024**3, root=root, path=f"{root}/alice-data")
        save_storage(db, CLUSTER, [directory], [filesystem_usage(root, 100, 40)], at)
        save_preference(db, TEAM, "UALICE", "fail", at)
        new = NewWatch(TEAM, "UALICE", "alice", "a40", 2, False, "hoffman-lab", "hoffman-lab",
                       "hoffman-lab")  # fmt: skip
        add_watch(db, CLUSTER, new, time.time(), 4 * 3600, 5)
    finally:
        db.close()


@pytest.fixture
async def slack(tmp_path: Path) -> AsyncIterator[SlackStandIn]:
    config = _config(tmp_path)
    _write_snapshot(config)
    async with SlackStandIn(users=USERS) as standin, running_bot(config, standin):
        await standin.wait_for_socket_connection(timeout=10)
        yield standin


def _texts(view: dict[str, Any]) -> str:
    return json.dumps(view["blocks"], ensure_ascii=False)


def _check_limits(view: dict[str, Any]) -> None:
    assert view["type"] == "home"
    assert 0 < len(view["blocks"]) <= MAX_HOME_BLOCKS
    for block in view["blocks"]:
        text = block.get("text", {}).get("text", "")
        assert len(text) <= MAX_SECTION_CHARS


async def _open_home(slack: SlackStandIn, user_id: str) -> dict[str, Any]:
    delivery = await slack.send_app_home_opened(user_id, timeout=10)
    assert delivery is not None
    await slack.wait_for_call(
        "views.publish",
        predicate=lambda c: c.ok and c.params.get("user_id") == user_id,
        timeout=10,
    )
    return slack.home_views[user_id]


async def test_linked_user_sees_jobs_lab_disk_and_preference(slack: SlackStandIn) -> None:
    view = await _open_home(slack, "UALICE")
    _check_limits(view)
    text = _texts(view)
    assert "`4242`" in text and "`4243`" in text  # running and pending
    assert "1 running (2 GPUs), 1 pending" in text
    assert "hoffman-lab" in text
    assert "2/4 GPUs in use (2 free under the cap)" in text
    assert "alice-data` `3.0T`" in text
    assert "`fail`, your choice" in text and PREFERENCE_MEANINGS["fail"] in text
    assert "#1: `a40:2` under `hoffman-lab`'s cap on `hoffman-lab`, ends in 3 h" in text
    assert '"action_id": "skybot_unwatch:1"' in text
    assert "⚠️" in text  # the data is an hour old, and the pollers cannot reach Slurm
    ages = view["blocks"][-1]
    assert ages["type"] == "context" and "Slurm: 1 h ago" in ages["elements"][0]["text"]


async def test_unlinked_user_is_told_how_to_link(slack: SlackStandIn) -> None:
    view = await _open_home(slack, "UCAROL")
    _check_limits(view)
    text = _texts(view)
    assert "/sky link YOUR_CLUSTER_USER" in text
    assert "/sky jobs [USER]" in text and "/sky notify" in text
    assert "4242" not in text  # nobody else's jobs


async def test_messages_tab_publishes_nothing(slack: SlackStandIn) -> None:
    await slack.send_app_home_opened("UALICE", tab="messages", timeout=10)
    # Each event's listener has returned when it is acked, and a Home tab is published after
    # that in the order the events came: once Carol's (opened next) is out, Alice's would be.
    await _open_home(slack, "UCAROL")
    assert [c.params.get("user_id") for c in slack.calls_to("views.publish")] == ["UCAROL"]
    assert "UALICE" not in slack.home_views


def test_error_view_and_block_limit() -> None:
    assert error_view()["type"] == "home"
    assert "could not build" in error_view()["blocks"][0]["text"]["text"]
    blocks = [section(str(i)) for i in range(250)]
    fitted = fit(blocks)
    assert len(fitted) == MAX_HOME_BLOCKS and fitted[-1] == blocks[-1]
