"""A 5,000-task array whose every task ends within one poll, on the real test cluster (issue
40), for tests/test_big_array_cluster.py and benchmarks/big_array_poll.py.

The test cluster runs 96 tasks at a time, so 5,000 tasks cannot run and end together. They are
submitted held and split into a job record each (an `scontrol update` of each task, as Slurm
does when a task starts), so squeue lists 5,000 jobs and sacct records 5,000 ends; one
`scancel` then ends all of them at once. The poll's figures are skybot's own
`skybot_poll_duration_seconds` (the Slurm poll: read, parse, transitions, store), scraped from
its /metrics after every poll."""

from __future__ import annotations

import asyncio
import contextlib
import re
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from msgspec.structs import replace

from core.config_schema import MetricsConfig
from tests.support.bot_process import free_port, linked_bot, linked_bot_config, wait_for_slurm_poll
from tests.support.cluster import as_user, cluster_script, sbatch_async, scancel_async, wait_for
from tests.support.slack_standin import SlackStandIn

TASKS = 5000
_SUM = re.compile(
    r'^skybot_poll_duration_seconds_(sum|count)\{cluster="(?P<cluster>[^"]*)",'
    r'source="slurm"\} (?P<value>\S+)$',
    re.MULTILINE,
)


def max_array_size() -> int:
    out = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    found = re.search(r"^MaxArraySize\s*=\s*(\d+)", out, re.MULTILINE)
    return int(found[1]) if found else 1001


def ensure_array_size(tasks: int = TASKS) -> None:
    """The cluster as this checkout's deploy script sets it up (MaxArraySize 5001): one set up
    before that raised it (or by another checkout) is brought up to date."""
    if max_array_size() <= tasks:
        cluster_script("up")
    size = max_array_size()
    assert size > tasks, f"MaxArraySize is {size} after `up`: an array of {tasks} cannot run"


async def held_split_array(name: str, tasks: int = TASKS) -> int:
    """alice's held array of `tasks` tasks of `true`, each task a job record of its own."""
    array_id = await sbatch_async(
        "alice", "-H", "-p", "debug", "-A", "hoffman-lab", "-c", "1", "-t", "1",
        f"--array=0-{tasks - 1}", "-J", name, "-o", "/dev/null", "--wrap", "true",
    )  # fmt: skip
    # One scontrol reading every update from stdin: 5,000 processes would take minutes.
    updates = "".join(f"update JobId={array_id}_{task} TimeLimit=2\n" for task in range(tasks))
    await asyncio.to_thread(_scontrol_as_alice, updates)
    return array_id


def _scontrol_as_alice(commands: str) -> None:
    subprocess.run(
        ["runuser", "-u", "alice", "--", "scontrol"],
        input=commands, capture_output=True, text=True, timeout=300, check=True, cwd="/tmp",
    )  # fmt: skip


def split_records(array_id: int) -> int:
    """How many job records squeue lists for the array (its tasks split, one each)."""
    out = as_user("alice", "squeue", "-h", "-j", str(array_id), "-o", "%i")
    return len(out.split())


@dataclass
class PollTimes:
    """Each Slurm poll's duration, from the bot's /metrics (sum and count of the histogram),
    with when it was seen: a poll per change in the count."""

    url: str
    cluster: str = "skynet"
    polls: list[tuple[float, float]] = field(default_factory=list)  # (seen at, seconds)
    _last: tuple[float, float] | None = None

    async def scrape(self, session: aiohttp.ClientSession) -> None:
        async with session.get(self.url) as response:
            text = await response.text()
        values = {
            m[1]: float(m["value"]) for m in _SUM.finditer(text) if m["cluster"] == self.cluster
        }
        if "sum" not in values or "count" not in values:
            return
        now = (values["sum"], values["count"])
        if self._last is not None and now[1] > self._last[1]:
            # Scraped every 0.1 s against a 2 s poll: one poll per step, or an average.
            seconds = (now[0] - self._last[0]) / (now[1] - self._last[1])
            self.polls.extend([(time.monotonic(), seconds)] * int(now[1] - self._last[1]))
        self._last = now

    def since(self, at: float) -> list[float]:
        return [seconds for seen, seconds in self.polls if seen >= at]

    def between(self, start: float, end: float) -> list[float]:
        return [seconds for seen, seconds in self.polls if start <= seen < end]


async def scrape_polls(times: PollTimes, stop: asyncio.Event) -> None:
    async with aiohttp.ClientSession() as session:
        while not stop.is_set():
            with contextlib.suppress(aiohttp.ClientError):  # not listening yet
                await times.scrape(session)
            await asyncio.sleep(0.1)


@dataclass
class BigArrayRun:
    """What one run saw: the DMs about the array, and the Slurm polls' seconds with the
    cluster empty of the array, with its tasks queued (nothing changing), and from the
    scancel to the end DM (the poll that saw the ends is the longest of those)."""

    array_id: int
    dms: list[str]
    empty: list[float]
    queued: list[float]
    ending: list[float]

    @property
    def ratio(self) -> float:
        """The poll that saw the ends over a quiet one (the median with the tasks queued)."""
        return max(self.ending) / statistics.median(self.queued)


async def run_big_array(
    tmp_path: Path, tasks: int = TASKS, name: str = "big5k", quiet: int = 3
) -> BigArrayRun:
    """The scenario: a bot with /metrics, `quiet` polls with the cluster empty, the array
    held and split, `quiet` polls with it queued, one scancel, the end DM, two more polls."""
    ensure_array_size(tasks)
    port = free_port()
    config = replace(linked_bot_config(tmp_path), metrics=MetricsConfig(port=port))
    times = PollTimes(f"http://127.0.0.1:{port}/metrics")
    stop = asyncio.Event()
    scraper = asyncio.create_task(scrape_polls(times, stop))
    database = config.database.path
    try:
        async with linked_bot(config) as slack:
            for _ in range(quiet):
                await wait_for_slurm_poll(database, acted_on=True)
            empty = times.since(0.0)[-quiet:]
            array_id = await held_split_array(name, tasks)
            records = await asyncio.to_thread(split_records, array_id)
            assert records == tasks, f"{records} records of {tasks} tasks: the split failed"
            await wait_for_slurm_poll(database, acted_on=True)  # the one that lists them
            await wait_for_slurm_poll(database, acted_on=True)
            queued_from = time.monotonic()
            for _ in range(quiet):
                await wait_for_slurm_poll(database, acted_on=True)
            cancelled_at = time.monotonic()
            queued = times.between(queued_from, cancelled_at)
            await scancel_async(str(array_id))

            def end_dms() -> list[str]:
                return _texts(slack, rf"Array job {array_id}\b|Job `{array_id}_[0-9]+`")

            await wait_for(end_dms, 120, "the end DM")
            await wait_for_slurm_poll(database, acted_on=True)
            await wait_for_slurm_poll(database, acted_on=True)
            ending = times.since(cancelled_at)
            dms = end_dms()
    finally:
        stop.set()
        await scraper
    return BigArrayRun(array_id, dms, empty, queued, ending)


def _texts(slack: SlackStandIn, pattern: str) -> list[str]:
    found = re.compile(pattern)
    return [
        str(call.params.get("text"))
        for call in slack.calls_to("chat.postMessage")
        if call.ok and found.search(str(call.params.get("text")))
    ]
