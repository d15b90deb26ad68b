"""Storage alerts end to end on a real (tmpfs) filesystem: the real StoragePoller scans it,
the watcher decides, the sender posts to the Slack stand-in."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from msgspec.structs import replace

from bot.config import (
    Config,
    DatabaseConfig,
    IdentityConfig,
    LabConfig,
    NotificationsConfig,
    SlurmConfig,
    load_config,
)
from handlers.identity import IdentityDirectory
from scheduler.outbox_policy import SenderPacing
from scheduler.outbox_sender import OutboxSender
from scheduler.storage_poller import StoragePoller
from scheduler.watchers import Watchers
from store.outbox import OutboxMessage, enqueue, outbox_rows
from store.writer import StoreWriter
from tests.support.bot_process import running_bot
from tests.support.factories import CLUSTER
from tests.support.outbox_sender import wait_until_settled
from tests.support.slack_standin import SlackStandIn, SlackUser
from tests.support.tmpfs import mounted_tmpfs

MIB = 1024 * 1024
CHANNEL = "#skynet-users"


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs, mounted for this test only."""
    with mounted_tmpfs(tmp_path / "flash9", "8M") as target:
        yield target


def make_config(tmp_path: Path, root: Path, **notifications: object) -> Config:
    base = load_config(None)
    return replace(
        base,
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
        identity=IdentityConfig(links={"T0STANDIN/U1": "alice"}),
        notifications=NotificationsConfig(**notifications),  # type: ignore[arg-type]
        labs=(LabConfig("hoffman-lab", "hoffman-lab", "hoffman-lab", (str(root),)),),
    )


def write_report(directory: Path, updated: str, kib: int) -> None:
    directory.mkdir(exist_ok=True)
    (directory / "disk-usage.txt").write_text(
        f"Updated: {updated}\nUsage (human-readable): {kib // 1024}M\nUsage (K): {kib}\n"
    )


def fill(path: Path, size: int) -> None:
    with path.open("wb") as f:
        f.write(b"\0" * size)
        f.flush()
        os.fsync(f.fileno())


class Bot:
    """The storage half of `skybot run`: poller, watcher and sender on one store."""

    def __init__(self, config: Config, slack: SlackStandIn) -> None:
        self.writer = StoreWriter(config.database.path)
        self.poller = StoragePoller(config.default_cluster, config, self.writer)
        self.identity = IdentityDirectory(config.identity, self.writer)
        self.sender = OutboxSender(
            self.writer,
            slack.web_client(),
            SenderPacing(per_channel_per_second=10.0, idle_seconds=0.2),
        )
        self.watchers = Watchers(
            config.default_cluster, config, self.writer, self.identity, self.sender.wake
        )

    async def poll(self) -> int:
        """One storage poll then the watcher, as the scheduler runs them; returns enqueued."""
        assert await self.poller.poll()
        return await self.watchers.after_storage_poll()


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    async with SlackStandIn(users=[SlackUser("U1", "alice")]) as standin:
        yield standin


@pytest.fixture
async def bot(tmp_path: Path, mount: Path, slack: SlackStandIn) -> AsyncIterator[Bot]:
    b = Bot(make_config(tmp_path, mount), slack)
    await b.identity.load()
    stop = asyncio.Event()
    task = asyncio.create_task(b.sender.run(stop))
    yield b
    stop.set()
    await asyncio.wait_for(task, timeout=10)
    b.writer.close()


async def deliver(bot: Bot) -> None:
    """Run the sender until the outbox is drained (for tests that do not keep one running)."""
    stop = asyncio.Event()
    task = asyncio.create_task(bot.sender.run(stop))
    try:
        await settle(bot)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=10)


def posts(slack: SlackStandIn) -> list[str]:
    return [c.params["text"] for c in slack.calls_to("chat.postMessage") if c.ok]


async def settle(bot: Bot) -> None:
    """Until the sender has nothing queued."""
    await wait_until_settled(bot.writer, timeout=10)


async def test_full_filesystem_warns_once_stays_quiet_and_warns_again_after_refill(
    bot: Bot, mount: Path, slack: SlackStandIn
) -> None:
    write_report(mount / "alice", "2024-05-06 03:00", 100)
    assert await bot.poll() == 0  # nearly empty: nothing to say

    fill(mount / "alice" / "data.bin", int(7.7 * MIB))  # ~96 %: past 90 and 95
    assert await bot.poll() == 1
    await slack.wait_for_call("chat.postMessage", predicate=lambda c: c.ok)
    await settle(bot)
    (warning,) = posts(slack)
    first_line = warning.splitlines()[0]
    assert first_line.startswith(f"🟠 `{mount}` (`hoffman-lab`) is 9")
    assert "full (past 95%)" in first_line and "free of 8.0M." in first_line
    assert f"Largest directories: `{mount}/alice`" in warning
    assert [(r["key"], r["target"]) for r in await bot.writer.run(outbox_rows)] == [
        (f"fs:{CLUSTER}:{mount}:95:1", CHANNEL)
    ]

    for _ in range(3):  # still full: quiet
        assert await bot.poll() == 0
    (mount / "alice" / "data.bin").unlink()  # emptied: quiet, and re-armed
    assert await bot.poll() == 0
    # Nothing queued: nothing can be posted later either.
    assert await bot.writer.run(outbox_rows, "queued") == []
    assert len(posts(slack)) == 1

    fill(mount / "alice" / "data.bin", int(7.7 * MIB))  # refilled: warns again
    assert await bot.poll() == 1
    await slack.wait_for_calls("chat.postMessage", 2, predicate=lambda c: c.ok)
    await settle(bot)
    assert len(posts(slack)) == 2
    assert [r["key"] for r in await bot.writer.run(outbox_rows)] == [
        f"fs:{CLUSTER}:{mount}:95:1",
        f"fs:{CLUSTER}:{mount}:95:2",
    ]


async def test_hoarder_pinged_once_per_report_through_the_real_poller(
    tmp_path: Path, mount: Path, slack: SlackStandIn
) -> None:
    config = make_config(tmp_path, mount, hoard_threshold_bytes=5 * 1024**4)
    bot = Bot(config, slack)
    await bot.identity.load()
    try:
        write_report(mount / "alice", "2024-05-06 03:00", 6 * 1024**3)  # 6 TiB
        write_report(mount / "bob", "2024-05-06 03:00", 7 * 1024**3)  # unlinked
        write_report(mount / "carol", "2024-05-06 03:00", 1 * 1024**3)  # under the mark
        assert await bot.poll() == 2
        assert await bot.poll() == 0
        await deliver(bot)
        texts = posts(slack)
        assert texts[0].startswith(f"📦 `bob`: `{mount}/bob` holds 7.0T (first report)")
        assert texts[1].startswith(f"📦 <@U1>: `{mount}/alice` holds 6.0T (first report)")

        # Next week's reports: alice still over (pinged again, with growth), bob cleaned up.
        write_report(mount / "alice", "2024-05-13 03:00", 6 * 1024**3 + 512 * 1024**2)
        write_report(mount / "bob", "2024-05-13 03:00", 1 * 1024**3)
        assert await bot.poll() == 1
        assert await bot.poll() == 0
        await deliver(bot)
        assert posts(slack)[2].startswith(
            f"📦 <@U1>: `{mount}/alice` holds 6.5T (+512G since the previous report)"
        )
        assert len(posts(slack)) == 3
    finally:
        bot.writer.close()


async def test_skybot_run_warns_about_a_full_filesystem_and_sends_what_was_queued(
    tmp_path: Path, mount: Path, slack: SlackStandIn
) -> None:
    """`run_bot` wires it all: storage poll -> watcher -> outbox -> sender, plus a restart."""
    config = replace(
        make_config(tmp_path, mount),
        slurm=SlurmConfig(bin_dir=str(tmp_path / "no-slurm"), poll_seconds=60),
    )
    # A DM queued by an earlier run that stopped before sending it.
    earlier = StoreWriter(config.database.path)
    await earlier.run(enqueue, [OutboxMessage("left-over", "U1", "from before")], 0.0)
    earlier.close()
    write_report(mount / "alice", "2024-05-06 03:00", 100)
    fill(mount / "alice" / "data.bin", int(7.9 * MIB))  # ~99 %

    async with running_bot(config, slack, stop_timeout=15):
        calls = await slack.wait_for_calls(
            "chat.postMessage", 2, predicate=lambda c: c.ok, timeout=15
        )
    by_channel = {c.params["channel"]: c.params["text"] for c in calls}
    assert by_channel["U1"] == "from before"
    assert by_channel[CHANNEL].startswith(f"🔴 `{mount}` (`hoffman-lab`) is 9")
    assert "(past 98%)" in by_channel[CHANNEL]
    assert len(slack.calls_to("chat.postMessage")) == 2
