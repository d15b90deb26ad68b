"""One user's odd job or odd disk report never switches skybot off for anyone else (issue 13).

The real bot, the real 22.05 cluster, real tmpfs lab storage and the Slack stand-in: alice
holds a job whose name is not UTF-8 and claims 2^63 KiB in her disk-usage.txt. Everyone
else's job DMs and both labs' storage alerts must still go out.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from bot.config import (
    LabConfig,
    NotificationsConfig,
    StorageConfig,
)
from tests.support.bot_process import linked_bot, linked_bot_config
from tests.support.cluster import sbatch, sbatch_async, wait_for
from tests.support.slack_standin import SlackStandIn
from tests.support.tmpfs import mounted_tmpfs

pytestmark = pytest.mark.cluster

MIB = 1024 * 1024
# sbatch gets the raw byte: a str with a surrogate escape is encoded back to \xff.
BAD_NAME = os.fsdecode(b"bad\xffname")


@pytest.fixture
def lab_storage(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    with ExitStack() as stack:
        yield (
            stack.enter_context(mounted_tmpfs(tmp_path / "flash9", "8M")),
            stack.enter_context(mounted_tmpfs(tmp_path / "share4", "8M")),
        )


def _report(directory: Path, kib: str) -> None:
    directory.mkdir(exist_ok=True)
    (directory / "disk-usage.txt").write_text(
        f"Updated: 2026-11-23 03:00\nUsage (human-readable): 6.0T\nUsage (K): {kib}\n"
    )


def _fill(path: Path, size: int) -> None:
    with path.open("wb") as f:
        f.write(b"\0" * size)


def _posts(slack: SlackStandIn) -> list[tuple[str, str]]:
    return [
        (str(c.params["channel"]), str(c.params.get("text")))
        for c in slack.calls_to("chat.postMessage")
        if c.ok
    ]


async def test_a_bad_job_name_and_a_huge_disk_report_blind_nobody_else(
    tmp_path: Path, lab_storage: tuple[Path, Path], clean_queue: None
) -> None:
    hoffman, kira = lab_storage
    _report(hoffman / "alice", str(2**63))  # hers: refused, nobody else's
    _report(hoffman / "bob", str(6 * 1024**3))  # 6 TiB: a hoarding ping
    _report(kira / "carol", str(7 * 1024**3))  # 7 TiB: a hoarding ping
    _fill(kira / "carol" / "data.bin", int(7.8 * MIB))  # kira's filesystem ~98 % full
    config = linked_bot_config(
        tmp_path,
        storage=StorageConfig(poll_seconds=5),
        notifications=NotificationsConfig(hoard_threshold_bytes=5 * 1024**4),
        labs=(
            LabConfig("hoffman-lab", "hoffman-lab", "hoffman-lab", (str(hoffman),)),
            LabConfig("kira-lab", "kira-lab", "kira-lab", (str(kira),)),
        ),
    )
    held = sbatch("alice", "--hold", "-p", "debug", "-A", "hoffman-lab", "-J", BAD_NAME,
                  "--wrap", "true")  # fmt: skip
    raw_squeue = (await _squeue_bytes()).split(b'"name"')
    assert any(b"bad\xffname" in part for part in raw_squeue), "squeue should pass the byte on"

    async with linked_bot(config) as slack:  # a poll has seen the queue, held job included
        fine = await sbatch_async("dave", "-p", "kira-lab", "-A", "kira-lab", "-J", "fine",
                                  "--wrap", "sleep 2")  # fmt: skip
        broken = await sbatch_async("bob", "-p", "hoffman-lab", "-A", "hoffman-lab",
                                    "-J", "broken", "--wrap", "sleep 2; exit 3")  # fmt: skip
        expected = {
            ("UDAVE", rf"Job {fine} `fine` completed successfully"),
            ("UBOB", rf"Job {broken} `broken` failed with exit code 3\b"),
            ("#skynet-users", rf"`{kira}` \(`kira-lab`\) is 9\d% full"),
            ("#skynet-users", rf"<@UCAROL>: `{kira}/carol` holds 7\.0T"),
            ("#skynet-users", rf"<@UBOB>: `{hoffman}/bob` holds 6\.0T"),
        }
        await wait_for(
            lambda: all(_posted(slack, target, words) for target, words in expected),
            60,
            "every alert posted",
            in_thread=False,
        )
        await asyncio.sleep(3)  # a few more polls

    for target, words in expected:
        assert _posted(slack, target, words), (target, words, _posts(slack))
    # alice's own report is refused, not stored, and not pinged about.
    about_alice = [post for post in _posts(slack) if "alice" in post[1]]
    assert not about_alice, about_alice
    with sqlite3.connect(config.database.path) as db:
        paths = {r[0] for r in db.execute("SELECT path FROM directories")}
        assert paths == {f"{hoffman}/bob", f"{kira}/carol"}
        names = dict(db.execute("SELECT job_id, json_extract(record, '$.name') FROM jobs"))
        assert names.get(held) == "bad\ufffdname"  # the held job is still seen, name repaired
        errors = [r[0] for r in db.execute("SELECT error FROM source_status") if r[0]]
        assert errors == []


def _posted(slack: SlackStandIn, target: str, pattern: str) -> bool:
    channels = {target, slack.dm_channel_for(target)} if target.startswith("U") else {target}
    return any(ch in channels and re.search(pattern, text) for ch, text in _posts(slack))


async def _squeue_bytes() -> bytes:
    process = await asyncio.create_subprocess_exec(
        "squeue", "--all", "--json", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    return out
