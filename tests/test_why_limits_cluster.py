"""Limits and reservations from the real cluster (issue 43), through both sources (the commands
and slurmrestd): an admin's `scontrol update` of a partition's MaxTime changes what `/sky why`
quotes one poll later, and a job kept out by a maintenance reservation gets a `--time` command
that, run as its owner, lets it start before the window."""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from core.view import ClusterView
from handlers.commands import command_table
from scheduler.slurm.poller import SlurmPoller
from scheduler.slurm.restd import RestdClient
from scheduler.slurm.restd_source import RestdSource
from scheduler.watchers.reservations import announce_reservations
from store.outbox import outbox_rows
from tests.support.asking import answer_from_view
from tests.support.bot_process import linked_bot, linked_bot_config, wait_for_slurm_poll
from tests.support.cluster import cluster_script, sbatch, wait_for
from tests.support.poller_harness import Harness, _config
from tests.support.restd_daemon import SOCKET, TOKEN
from tests.support.slack_standin import SlackStandIn
from tests.support.why_answers import run_as, suggested, why

pytestmark = pytest.mark.cluster

PARTITION = "debug"


class LimitsHarness(Harness):
    """The poller's harness, with the limits poll, reading through `source`."""

    def __init__(self, tmp_path: Path, source: str) -> None:
        super().__init__(_config(tmp_path))
        self.closed = False
        if source == "slurmrestd":
            restd = RestdSource(RestdClient(SOCKET, TOKEN, timeout=20))
            self.poller = SlurmPoller(
                self.config.default_cluster,
                self.config,
                self.writer,
                lambda: self.now,
                source=restd,
            )

    async def poll(self) -> ClusterView:
        self.now = max(self.now, time.time())
        await self.poller.poll_limits()
        return await super().poll()

    async def aclose(self) -> None:
        if not self.closed:
            self.closed = True
            await self.poller.close()
            self.close()


@pytest.fixture(params=["cli", "slurmrestd"])
async def harness(
    request: pytest.FixtureRequest, tmp_path: Path, clean_queue: None
) -> AsyncIterator[LimitsHarness]:
    if request.param == "slurmrestd":
        cluster_script("up")  # slurmrestd running, as test_restd_cluster.py wants it
    h = LimitsHarness(tmp_path, request.param)
    yield h
    await h.aclose()


def scontrol(*args: str) -> str:
    done = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def max_time_restored() -> Iterator[None]:
    """The partition's MaxTime as it was, whatever the test did to it."""
    before = re.search(r"MaxTime=(\S+)", scontrol("show", "partition", PARTITION))
    assert before is not None
    yield
    scontrol("update", f"PartitionName={PARTITION}", f"MaxTime={before[1]}")


def state_of(job_id: int) -> str:
    return subprocess.run(
        ["squeue", "-h", "-j", str(job_id), "-o", "%T %r"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout.strip()


async def test_why_quotes_the_max_time_the_partition_has_now(
    harness: LimitsHarness, max_time_restored: None
) -> None:
    scontrol("update", f"PartitionName={PARTITION}", "MaxTime=04:00:00")
    job = sbatch(
        "alice",
        *("-A", "hoffman-lab", "-p", PARTITION, "--time=5:00:00", "--chdir=/tmp"),
        *("-o", "/dev/null", "--wrap", "sleep 300"),
    )
    await wait_for(lambda: "PartitionTimeLimit" in state_of(job), 60, "PartitionTimeLimit")
    text = await why(harness, str(job))
    assert "4 h at most" in text, text
    assert f"`scontrol update JobId={job} TimeLimit=04:00:00`" in text, text

    scontrol("update", f"PartitionName={PARTITION}", "MaxTime=03:00:00")
    text = await why(harness, str(job))  # one poll later
    assert "3 h at most" in text and "4 h" not in text, text
    [command] = [c for c in suggested(text) if c.startswith("scontrol update")]
    assert command == f"scontrol update JobId={job} TimeLimit=03:00:00"

    # The command it gives, run as alice, is one Slurm takes, and the job then starts.
    result = await asyncio.to_thread(run_as, "alice", command)
    assert result.returncode == 0, result.stderr
    await wait_for(lambda: state_of(job).startswith("RUNNING"), 60, f"job {job} to start")


@pytest.fixture
def reservations() -> Iterator[list[str]]:
    """Names of reservations the test makes, deleted after it whatever happens."""
    names: list[str] = []
    yield names
    for name in names:
        subprocess.run(["scontrol", "delete", f"reservation={name}"], timeout=30, check=False)


def reserve(names: list[str], name: str, *settings: str) -> None:
    names.append(name)
    scontrol("create", "reservation", f"reservationname={name}", *settings)


async def ask(harness: LimitsHarness, text: str, user: str = "alice") -> str:
    """Any command as `user` asks it in Slack, after a fresh poll (as `why` does)."""
    verb, _, rest = text.partition(" ")
    if verb == "why":
        return await why(harness, rest, user)
    view = await harness.poll()
    reply = answer_from_view(
        command_table(), view, text, team_id="T1", user_id="U1", cluster_user=user,
        now=time.time(),
    )  # fmt: skip
    return reply.text


async def announced(harness: LimitsHarness) -> list[dict[str, object]]:
    view = await harness.poll()
    config = harness.config
    await announce_reservations(harness.writer, config, view, config.default_cluster)
    rows: list[dict[str, object]] = await harness.writer.run(outbox_rows)
    return [r for r in rows if str(r["key"]).startswith("reservation:")]


async def test_a_maintenance_window_gets_a_time_that_ends_before_it_and_one_announcement(
    harness: LimitsHarness, reservations: list[str], tmp_path: Path
) -> None:
    reserve(
        reservations, "skybot_why_maint",
        "starttime=now+40minutes", "duration=60", "nodes=ALL", "users=root",
        "flags=maint,ignore_jobs",
    )  # fmt: skip
    job = sbatch(
        "alice",
        *("-A", "hoffman-lab", "-p", "hoffman-lab", "--time=2:00:00", "--gpus=1"),
        *("--chdir=/tmp", "-o", "/dev/null", "--wrap", "sleep 300"),
    )
    await wait_for(lambda: "ReqNodeNotAvail" in state_of(job), 60, "ReqNodeNotAvail")
    text = await ask(harness, f"why {job}")
    assert "Reservation `skybot_why_maint` (maintenance) holds" in text, text
    assert " UTC (in 3" in text, text  # its start: in 39-40 min
    [command] = [c for c in suggested(text) if c.startswith("scontrol update")]
    limit = re.fullmatch(rf"scontrol update JobId={job} TimeLimit=00:(\d\d):00", command)
    assert limit is not None and 30 <= int(limit[1]) <= 35, command

    # Run as alice, the command lets the job start now, before the window.
    result = await asyncio.to_thread(run_as, "alice", command)
    assert result.returncode == 0, result.stderr
    await wait_for(lambda: state_of(job).startswith("RUNNING"), 60, f"job {job} to start")

    # Announced once: on this poll, the next, and after a restart of the bot.
    [row] = await announced(harness)
    assert "`skybot_why_maint`" in str(row["text"]) and " to " in str(row["text"])
    assert await announced(harness) == [row]
    await harness.aclose()
    restarted = LimitsHarness(tmp_path, "cli")
    try:
        assert await announced(restarted) == [row]
    finally:
        await restarted.aclose()


async def test_free_and_gpus_say_which_idle_gpus_are_reserved(
    harness: LimitsHarness, reservations: list[str]
) -> None:
    reserve(
        reservations, "skybot_why_bob",
        "starttime=now", "duration=30", "nodes=clippy", "users=bob",
    )  # fmt: skip
    text = await ask(harness, "free")
    [clippy] = [line for line in text.splitlines() if "`clippy`" in line]
    assert "reserved: `skybot_why_bob` until" in clippy, text
    assert all("reserved" not in line for line in text.splitlines() if "`baymax`" in line)
    text = await ask(harness, "gpus hoffman-lab")
    assert "of them on reserved nodes" in text, text


def pending_by_priority(partition: str) -> list[tuple[int, int]]:
    """(job id, priority) of the partition's pending jobs as squeue has them now, in the
    order Slurm considers them: higher priority first, then the lower job id."""
    out = subprocess.run(
        ["squeue", "-h", "-t", "PD", "-p", partition, "-o", "%A|%Q"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    rows = [tuple(int(x) for x in line.split("|")) for line in out.split()]
    return sorted(((r[0], r[1]) for r in rows), key=lambda r: (-r[1], r[0]))


# sprio's weighted factors in the order the answer names them.
FACTOR_NAMES = ("age", "fair-share", "job size", "partition", "QOS")


def sprio_factors(job: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(weights, the job's factors) as sprio prints them now (age, fair-share, job size,
    partition, QOS), each rounded as skybot rounds it."""
    fmt = "--format=%i|%A|%F|%J|%P|%Q"
    weights, mine = (
        subprocess.run(["sprio", "-h", *args, fmt], capture_output=True, text=True, timeout=30)
        for args in (["-w"], ["-j", str(job)])
    )
    assert weights.returncode == 0 and mine.returncode == 0, weights.stderr + mine.stderr
    values = [
        tuple(round(float(x)) for x in out.split("|")[1:6]) for out in (weights.stdout, mine.stdout)
    ]
    return values[0], values[1]


def slurm_now(job: int, partition: str) -> tuple[object, ...]:
    """What Slurm says of `job`'s priority now: sprio's weights and factors, and squeue's order
    of the partition's pending jobs."""
    return (*sprio_factors(job), pending_by_priority(partition))


async def answer_between_equal_reads(
    harness: LimitsHarness, job: int, partition: str, user: str
) -> tuple[str, tuple[object, ...]]:
    """`/sky why JOB` as `user` asks it, with what Slurm said just before the polls and just
    after the answer, the same both times: slurmctld recomputes fair-share and priorities
    every PriorityCalcPeriod, and an answer read across that moment is asked again. Two polls:
    through slurmrestd, the priorities come from the jobs document the poll before read."""

    async def between() -> tuple[str, tuple[object, ...]] | None:
        before = await asyncio.to_thread(slurm_now, job, partition)
        await harness.poll()
        text = await ask(harness, f"why {job}", user)
        after = await asyncio.to_thread(slurm_now, job, partition)
        return (text, before) if before == after else None

    return await wait_for(between, 120, "an answer between two equal reads of sprio")


@pytest.mark.parametrize("source", ["cli", "slurmrestd"])
async def test_a_job_pending_on_priority_gets_its_place_the_gpus_ahead_and_its_lowest_factor(
    tmp_path: Path, clean_queue: None, source: str
) -> None:
    """On both clusters (multifactor with fair-share, deploy/testcluster-lib.sh), through
    either source: its place and priority as squeue orders the pending jobs; and, read
    through the commands, its factors, their weights and the lowest of them exactly as sprio
    states them at that moment (slurmrestd has no sprio: no factors, and none made up)."""
    cluster_script("up")  # this checkout's slurm.conf (its weights), and slurmrestd running
    harness = LimitsHarness(tmp_path, source)
    try:
        lab = ("-A", "kira-lab", "-p", "kira-lab", "--chdir=/tmp", "-o", "/dev/null")
        # alice's lab holds every a40, so the kira-lab jobs below queue for them. Running
        # before they are submitted: under fair-share carol's and dave's may outrank hers.
        holder = sbatch("alice", "-A", "hoffman-lab", "-p", "hoffman-lab", "--gpus=a40:4",
                        "--chdir=/tmp", "-o", "/dev/null", "--wrap", "sleep 300")  # fmt: skip
        await wait_for(lambda: state_of(holder).startswith("RUNNING"), 60, f"job {holder} to run")
        asked = {}
        for user, count in (("carol", 1), ("dave", 2), ("carol", 1)):
            job = sbatch(user, *lab, f"--gpus=a40:{count}", "--wrap", "sleep 60")
            asked[job] = count
        last = max(asked)
        await wait_for(lambda: "Priority" in state_of(last), 60, f"job {last} pending on Priority")
        text, (weights, mine, order) = await answer_between_equal_reads(
            harness, last, "kira-lab", "carol"
        )
        assert isinstance(weights, tuple) and isinstance(mine, tuple) and isinstance(order, list)

        ids = [job for job, _ in order]
        ahead = ids[: ids.index(last)]
        priority = dict(order)[last]
        assert (
            f"By Slurm's priority ({priority}) it is number {len(ahead) + 1} of the "
            f"{len(ids)} pending jobs that want `kira-lab` and `a40:1`: the "
            f"{len(ahead)} job{'s' if len(ahead) != 1 else ''} ahead of it "
            f"{'asks' if len(ahead) == 1 else 'ask'} for "
            f"{sum(asked[j] for j in ahead)} GPU"
        ) in text, (text, order)
        # The weights deploy/testcluster-lib.sh sets, as sprio states them.
        assert weights == (100, 10000, 1000, 1000, 0), weights
        if source == "slurmrestd":
            assert "priority factors" not in text, text
            return
        shown = ", ".join(
            f"{name} {value} of {weight}"
            for name, value, weight in zip(FACTOR_NAMES, mine, weights, strict=True)
            if weight
        )
        shares = {n: v / w for n, v, w in zip(FACTOR_NAMES, mine, weights, strict=True) if w}
        # On a tie, skybot names the first in its own order (age, fair-share, job size, ...).
        lowest = min(shares, key=lambda n: (shares[n], FACTOR_NAMES.index(n)))
        assert f"Its priority factors (sprio): {shown}. The lowest is {lowest}:" in text, (
            text,
            mine,
        )
    finally:
        await harness.aclose()


def announcements(slack: SlackStandIn, name: str) -> list[tuple[str, str]]:
    """(channel, text) of each post the stand-in accepted that announces reservation `name`."""
    return [
        (str(call.params.get("channel")), str(call.params.get("text")))
        for call in slack.calls_to("chat.postMessage")
        if call.ok and f"`{name}`" in str(call.params.get("text"))
    ]


async def test_the_running_bot_announces_a_maintenance_window_once_across_a_restart(
    tmp_path: Path, clean_queue: None, reservations: list[str]
) -> None:
    """`skybot run` end to end, through the Slack stand-in: the limits poll sees the window,
    the watcher enqueues it, the sender posts it to the alert channel, once; the bot started
    again on the same database posts nothing more."""
    name = "skybot_why_announce"
    reserve(
        reservations, name,
        "starttime=now+2hours", "duration=30", "nodes=clippy", "users=root",
        "flags=maint,ignore_jobs",
    )  # fmt: skip
    config = linked_bot_config(tmp_path)
    async with linked_bot(config) as slack:
        [(channel, text)] = await wait_for(
            lambda: announcements(slack, name) or None, 30, "the post"
        )
        # The default alert channel, #skynet-users, as the stand-in names it.
        assert channel in ("C0SKYUSERS", "#skynet-users"), channel
        assert "Maintenance" in text and "`clippy`" in text and " to " in text
        started = time.time()
        await wait_for_slurm_poll(config.database.path, after=started, acted_on=True)
        assert len(announcements(slack, name)) == 1
    async with linked_bot(config) as slack:
        # Two limits polls and their watchers at 2 s each, and the sender's time to post.
        await asyncio.sleep(6)
        assert announcements(slack, name) == []
