"""`--chart` and the weekly digest end to end: the bot's own pollers record real history (the
real Slurm cluster, a real tmpfs with weekly reports), slash commands ask for charts and a
digest through the Slack stand-in, and what arrives through chat.postMessage and
files_upload_v2 shows that history."""

from __future__ import annotations

import io
import os
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.image import imread
from msgspec.structs import replace

from bot.config import (
    Config,
    DatabaseConfig,
    IdentityConfig,
    LabConfig,
    SlurmConfig,
    StorageConfig,
    load_config,
)
from core.charts import CAP_COLOUR, LAB_COLOUR
from core.digest import week_ending
from scheduler.digest import WeeklyDigest
from store.db import open_db
from store.history import directory_size_series, lab_usage_samples
from store.writer import StoreWriter
from tests.support.bot_process import running_bot
from tests.support.cluster import sbatch, scancel_everything, squeue_state, wait_for, wait_until
from tests.support.factories import CLUSTER
from tests.support.slack_standin import SlackStandIn, SlackUser
from tests.support.slack_standin.records import UploadedFile
from tests.support.tmpfs import mounted_tmpfs

pytestmark = pytest.mark.cluster

TEAM, ALICE = "T0STANDIN", "UALICE"
LAB_CHANNEL = "C0HOFFMAN"
DAY = 86400.0


@pytest.fixture
def alice_runs_two_gpus(cluster: None) -> Iterator[int]:
    scancel_everything()
    job = sbatch(
        "alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "--gpus-per-node=a40:2",
        "--wrap", "sleep 600",
    )  # fmt: skip
    wait_until(lambda: squeue_state(job) == "RUNNING", 30, "alice's job to run")
    yield job
    scancel_everything()


@pytest.fixture
def lab_storage(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path / "flash9", "4M") as root:
        yield root


def write_report(root: Path, user: str, updated: float, kib: int) -> None:
    home = root / user
    home.mkdir(exist_ok=True)
    stamp = datetime.fromtimestamp(updated).strftime("%Y-%m-%d %H:%M")
    (home / "disk-usage.txt").write_text(
        f"Updated: {stamp}\nUsage (human-readable): {kib // 1024**2}G\nUsage (K): {kib}\n"
    )


@dataclass
class Bot:
    slack: SlackStandIn
    db_path: Path
    config: Config

    async def sky(self, text: str, channel_id: str = "D0ALICE") -> str:
        answer = await self.slack.slash_command_answer(
            command="/sky", text=text, user_id=ALICE, team_id=TEAM, channel_id=channel_id,
            timeout=10,
        )  # fmt: skip
        return str(answer["text"])

    async def uploaded(self, count: int) -> list[UploadedFile]:
        def done() -> list[UploadedFile] | None:
            completed = [f for f in self.slack.files.values() if f.completed]
            return completed if len(completed) >= count else None

        return await wait_for(done, 20, f"{count} completed uploads", 0.1, in_thread=False)


@pytest.fixture
async def bot(alice_runs_two_gpus: int, lab_storage: Path, tmp_path: Path) -> AsyncIterator[Bot]:
    base = load_config(None)
    labs = tuple(
        replace(lab, storage_roots=(str(lab_storage),)) if lab.name == "hoffman-lab" else lab
        for lab in base.labs
    )
    assert any(isinstance(lab, LabConfig) for lab in labs)
    config = replace(
        base,
        slurm=SlurmConfig(poll_seconds=1, caps_poll_seconds=1),
        storage=StorageConfig(poll_seconds=1),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
        identity=IdentityConfig(links={f"{TEAM}/{ALICE}": "alice"}),
        labs=labs,
    )
    now = time.time()
    write_report(lab_storage, "alice", now - 21 * DAY, 40 * 1024**2)
    write_report(lab_storage, "bob", now - 21 * DAY, 10 * 1024**2)
    async with SlackStandIn(users=[SlackUser(ALICE, "alice")]) as slack, running_bot(config, slack):
        await slack.wait_for_socket_connection(timeout=15)
        db_path = tmp_path / "skybot.db"
        # Three more weekly reports, each picked up by the real storage poller.
        for weeks_ago, alice_gib, bob_gib in ((2, 55, 10), (1, 70, 11), (0, 90, 11)):
            await _wait_for_report_count(db_path, lab_storage, 3 - weeks_ago)
            write_report(lab_storage, "alice", now - weeks_ago * 7 * DAY, alice_gib * 1024**2)
            write_report(lab_storage, "bob", now - weeks_ago * 7 * DAY, bob_gib * 1024**2)
        await _wait_for_report_count(db_path, lab_storage, 4)
        await _wait_for_gpu_samples(db_path, count=5)
        yield Bot(slack, db_path, config)


async def _wait_for_report_count(db_path: Path, root: Path, count: int) -> None:
    def recorded() -> bool:
        if not db_path.exists():
            return False
        db = open_db(db_path)
        series = directory_size_series(db, CLUSTER, [str(root)], 0, time.time() + DAY, 10)
        db.close()
        return bool(series) and len(series.get("alice", [])) >= count

    what = f"the storage poller to record {count} reports"
    await wait_for(recorded, 15, what, 0.1, in_thread=False)  # between the in-process bot's writes


async def _wait_for_gpu_samples(db_path: Path, count: int) -> None:
    def recorded() -> bool:
        db = open_db(db_path)
        samples = lab_usage_samples(db, CLUSTER, "hoffman-lab", 0, time.time() + 1)
        db.close()
        return len([s for s in samples if s.gpus_used == 2 and s.cap == 4]) >= count

    what = "the Slurm poller to record hoffman-lab's usage"
    await wait_for(recorded, 30, what, 0.2, in_thread=False)


def picture(file: UploadedFile) -> np.ndarray:
    assert file.content is not None and file.content.startswith(b"\x89PNG")
    return imread(io.BytesIO(file.content))[:, :, :3]


def coloured(image: np.ndarray, colour: str) -> np.ndarray:
    return np.all(np.abs(image - np.array(to_rgb(colour))) < 0.08, axis=2)


async def test_gpu_and_disk_charts_arrive_in_the_askers_dm(bot: Bot) -> None:
    answer = await bot.sky("gpus hoffman-lab --chart")
    assert "hoffman-lab" in answer and "2/4 GPUs in use" in answer
    assert "Drawing the chart; it will arrive in your DM" in answer
    answer = await bot.sky("disk hoffman-lab --chart")
    assert "alice" in answer and "Drawing the chart" in answer

    files = {f.filename: f for f in await bot.uploaded(2)}
    dm = bot.slack.dm_channel_for(ALICE)
    gpus, disk = files["hoffman-lab-gpus.png"], files["hoffman-lab-disk.png"]
    assert gpus.channel_id == dm and disk.channel_id == dm
    assert gpus.initial_comment == "*`hoffman-lab`*: GPUs in use against the cap, last 7 days"

    image = picture(gpus)
    if keep := os.environ.get("SKYBOT_KEEP_CHARTS"):  # to look at them: a directory
        Path(keep, gpus.filename).write_bytes(gpus.content or b"")
        Path(keep, disk.filename).write_bytes(disk.content or b"")
    assert image.shape[:2] == (450, 900)
    # The history is a minute old, so the chart spans that minute. In the middle of the plot
    # the lab's 2 GPUs are a blue band from the axis up, and the cap (4, from sacctmgr) a red
    # line twice as high.
    middle = image[:, 450:750]
    red_rows = np.flatnonzero(coloured(middle, CAP_COLOUR).any(axis=1))
    line_rows = np.flatnonzero(coloured(middle, LAB_COLOUR).any(axis=1))
    # The band under the line is LAB_COLOUR at 35 % over white.
    band = 1 - 0.35 * (1 - np.array(to_rgb(LAB_COLOUR)))
    band_rows = np.flatnonzero(np.all(np.abs(middle - band) < 0.05, axis=2).any(axis=1))
    assert red_rows.size and line_rows.size and band_rows.size, "cap, usage or band missing"
    axis_row = band_rows.max() + 1
    cap_height = axis_row - red_rows.mean()
    usage_height = axis_row - line_rows.mean()
    assert cap_height == pytest.approx(2 * usage_height, rel=0.1), (cap_height, usage_height)

    alt = _upload_params(bot.slack, "hoffman-lab-gpus.png")["alt_txt"]
    assert "peak 2" in alt and "cap 4" in alt

    assert picture(disk).shape[:2] == (450, 900)
    alt = _upload_params(bot.slack, "hoffman-lab-disk.png")["alt_txt"]
    assert "alice 40.0 to 90.0 GiB" in alt and "bob 10.0 to 11.0 GiB" in alt


async def test_chart_here_goes_to_the_channel_and_names_the_asker(bot: Bot) -> None:
    answer = await bot.sky("gpus --chart --here", channel_id=LAB_CHANNEL)
    assert "appear in this channel" in answer
    (file,) = await bot.uploaded(1)
    assert file.channel_id == LAB_CHANNEL
    assert file.initial_comment is not None and f"<@{ALICE}>" in file.initial_comment
    # Asking again within the minute does not queue a second picture.
    assert "already on its way" in await bot.sky("gpus --chart --here", channel_id=LAB_CHANNEL)


async def test_chart_flag_on_a_command_without_one_says_which_have(bot: Bot) -> None:
    answer = await bot.sky("free --chart")
    assert "`/sky free` has no chart" in answer
    assert "`/sky gpus --chart`" in answer and "`/sky disk --chart`" in answer
    answer = await bot.sky("disk carol --chart")
    assert "Disk charts are drawn per lab" in answer


def _upload_params(slack: SlackStandIn, filename: str) -> dict[str, str]:
    for call in slack.calls_to("files.getUploadURLExternal"):
        if call.params.get("filename") == filename:
            return {k: str(v) for k, v in call.params.items()}
    raise AssertionError(f"no upload of {filename}")


@pytest.mark.lane_only
async def test_weekly_digest_reaches_the_lab_channel_with_its_chart(bot: Bot) -> None:
    answer = await bot.sky("digest hoffman-lab on", channel_id=LAB_CHANNEL)
    assert answer.startswith(f"Done: <#{LAB_CHANNEL}> will get *`hoffman-lab`*'s weekly digest")
    # The lab's other two GPUs too, so alice reaches a listed share (a minute of GPU time) in
    # half the wait; the job ends with the fixture's scancel.
    more = sbatch(
        "alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "--gpus-per-node=a40:2",
        "--wrap", "sleep 600",
    )  # fmt: skip
    await wait_for(lambda: squeue_state(more) == "RUNNING", 30, "her job")
    await _wait_for_gpu_seconds(bot.db_path, "alice", at_least=70)
    preview = await bot.sky("digest hoffman-lab")
    assert "• `alice`: " in preview and f"Posted every Mon at 09:00 in <#{LAB_CHANNEL}>" in preview

    # Next week's digest, decided now (a week's wait is not a test): the subscription is older
    # than that week's posting time, so it is due; the running bot's own sender delivers it.
    writer = StoreWriter(bot.db_path)
    try:
        tz = datetime.now().astimezone().tzinfo
        assert tz is not None
        due = week_ending(time.time() + 7 * DAY, "mon", 9, tz)
        digest = WeeklyDigest(bot.config, writer, lambda: None)
        assert await digest.post_week(due) == 2
        assert await digest.post_week(due) == 0
    finally:
        writer.close()
    posted = await bot.slack.wait_for_call(
        "chat.postMessage", predicate=lambda c: c.params.get("channel") == LAB_CHANNEL, timeout=40
    )
    text = str(posted.params["text"])
    assert text.startswith("`hoffman-lab`: the week of ")
    assert "*GPU-hours in `hoffman-lab`*" in text and "• `alice`: " in text
    assert "*Overcap*: not used this week; no jobs were preempted." in text
    assert "*Storage*: +" in text and "/alice` +" in text
    (chart,) = [f for f in await bot.uploaded(1) if f.channel_id == LAB_CHANNEL]
    assert chart.filename == "hoffman-lab-gpus.png"
    assert picture(chart).shape[:2] == (450, 900)


async def _wait_for_gpu_seconds(db_path: Path, user: str, at_least: float) -> None:
    def credited() -> bool:
        db = open_db(db_path)
        seconds = db.execute(
            "SELECT COALESCE(SUM(seconds), 0) FROM gpu_seconds WHERE user = ?", [user]
        ).fetchone()[0]
        db.close()
        return bool(seconds >= at_least)

    what = f"{user} to be credited {at_least} GPU-seconds"
    await wait_for(credited, 60, what, 0.2, in_thread=False)
