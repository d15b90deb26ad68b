"""How many times the poll -> DM walk calls the writer (issue 41): one call per poll saves the
changes, the lab usage and the job DMs they decide; the sender claims each message in one call
and records its outcome in one more. Every writer call is a hop to the writer's thread and
a turn in its queue behind everything else the bot writes, so these counts may only go down.

The writer here is the real one, wrapped to name each function it is given; Slurm is
stand-in commands printing 22.05's recorded JSON, Slack the stand-in.
"""

from __future__ import annotations

import base64
import json
import shlex
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

import pytest
import sqlite_utils
from msgspec.structs import replace

from bot.cluster_wing import build_wing
from bot.config import Config, DatabaseConfig, IdentityConfig, SlurmConfig, load_config
from core.runner_contract import RunnerReply, RunnerRequest
from handlers.identity import IdentityDirectory
from scheduler.outbox_policy import SenderPacing
from scheduler.outbox_sender import OutboxSender
from scheduler.watchers import Watchers
from store.outbox import OutboxMessage, enqueue, outbox_rows
from store.writer import StoreWriter
from tests.support.empty_database import empty_database
from tests.support.slack_standin import SlackStandIn, SlackUser

V38 = Path(__file__).parent / "fixtures" / "slurm" / "v0.0.38"

P = ParamSpec("P")
T = TypeVar("T")


class CountingWriter(StoreWriter):
    """The store's writer, naming each function it runs, in order."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.calls: list[str] = []

    async def run(
        self,
        fn: Callable[Concatenate[sqlite_utils.Database, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        self.calls.append(getattr(fn, "__name__", repr(fn)))
        return await super().run(fn, *args, **kwargs)

    def taken(self) -> list[str]:
        """The calls since the last look."""
        calls, self.calls = self.calls, []
        return calls


@pytest.fixture
def counting(tmp_path: Path) -> AsyncIterator[CountingWriter]:
    writer = CountingWriter(empty_database(tmp_path / "skybot.db"))
    yield writer
    writer.close()


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    async with SlackStandIn(users=[SlackUser("U1", "alice"), SlackUser("U2", "bob")]) as standin:
        yield standin


async def test_the_sender_claims_a_message_in_one_call_and_records_it_in_one(
    counting: CountingWriter, slack: SlackStandIn
) -> None:
    """Two DMs: per DM one claim (the load and the mark `sending` together) and one record,
    and one claim that finds nothing due. Before: load, mark_sending, mark_sent per DM."""
    messages = [OutboxMessage("a", "U1", "one"), OutboxMessage("b", "U2", "two")]
    await counting.run(enqueue, messages, time.time())
    counting.taken()
    sender = OutboxSender(counting, slack.web_client(), SenderPacing(per_channel_per_second=20))
    report = await sender.send_due()
    assert report.sent == 2
    assert counting.taken() == [
        "claim_next_due",
        "mark_sent",
        "claim_next_due",
        "mark_sent",
        "claim_next_due",
    ]
    assert [row["state"] for row in await counting.run(outbox_rows)] == ["sent", "sent"]


def _stand_in_slurm(bin_dir: Path) -> None:
    """22.05's commands, printing the documents in `bin_dir` (squeue.json, sacct.json)."""
    bin_dir.mkdir()
    bodies = {
        "squeue": f"exec cat {shlex.quote(str(bin_dir / 'squeue.json'))}",
        "sinfo": f"exec cat {shlex.quote(str(V38 / 'sinfo.json'))}",
        "sacct": f"exec cat {shlex.quote(str(bin_dir / 'sacct.json'))}",
        "scontrol": "echo \"scontrol: unrecognized option '--json'\" >&2; exit 1",
        "sdiag": "echo 'DBD Agent queue size: 0'",
    }
    for command, body in bodies.items():
        (bin_dir / command).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / command).chmod(0o755)


def _documents(bin_dir: Path, ended_at: float | None, state: str = "COMPLETED") -> None:
    """squeue lists the recording's jobs, alice's running job 108 among them; or, with
    `ended_at`, not 108, which sacct says ended in `state` then."""
    squeue = json.loads((V38 / "squeue.json").read_text())
    sacct = json.loads((V38 / "sacct.json").read_text())
    (record,) = [j for j in sacct["jobs"] if j["job_id"] == 108]
    sacct["jobs"] = []
    if ended_at is not None:
        squeue["jobs"] = [j for j in squeue["jobs"] if j["job_id"] != 108]
        record["state"]["current"] = state
        record["time"]["end"] = int(ended_at)
        sacct["jobs"] = [record]
    (bin_dir / "squeue.json").write_text(json.dumps(squeue))
    (bin_dir / "sacct.json").write_text(json.dumps(sacct))


def _config(tmp_path: Path, bin_dir: Path) -> Config:
    return replace(
        load_config(None),
        slurm=SlurmConfig(bin_dir=str(bin_dir), command_timeout_seconds=10),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
        identity=IdentityConfig(links={"T1/U1": "alice"}),
    )


async def test_a_poll_with_a_job_end_is_one_writer_call_and_its_dm_two_more(
    tmp_path: Path, slack: SlackStandIn
) -> None:
    """The Slurm poll as `skybot run` wires it (bot/cluster_wing.py): alice's job 108 ends
    between two polls. The second poll saves its changes, the labs' usage and her DM in one
    writer call; its after-poll hooks add none to the job-end walk but the snapshot watchers'
    (cap waits, GPU watches: they read the snapshot the poll wrote); the sender claims and
    records the DM in two. Before (issue 41): the labs' limits, the save, the usage, the
    notifier's four, then load, mark sending and mark sent: 11 on the walk."""
    bin_dir = tmp_path / "bin"
    _stand_in_slurm(bin_dir)
    _documents(bin_dir, None)
    config = _config(tmp_path, bin_dir)
    writer = CountingWriter(empty_database(tmp_path / "skybot.db"))
    sender = OutboxSender(writer, slack.web_client(), SenderPacing(per_channel_per_second=20))
    identity = IdentityDirectory(config.identity, writer)
    wing = await build_wing(config, config.default_cluster, writer, identity, sender.wake)
    slurm = wing.polls[0]
    try:
        await slurm.poll()  # the first poll: the store learns the jobs, 108 running
        for then in slurm.then:
            await then()
        _documents(bin_dir, time.time())
        writer.taken()
        assert await wing.poller.poll_jobs()
        assert writer.taken() == ["save_poll"]
        for then in slurm.then:  # the snapshot's refresh, then the watchers
            await then()
        # Not on the walk: the cap-wait and GPU-watch watchers, one call each, which decide
        # from the snapshot the poll wrote (its refresh is on a thread of its own).
        assert writer.taken() == ["decide", "decide"]
        report = await sender.send_due()
        assert writer.taken() == ["claim_next_due", "mark_sent", "claim_next_due"]
    finally:
        await wing.poller.close()
        wing.cache.close()
        writer.close()
    assert report.sent == 1
    (dm,) = slack.messages.values()
    assert "108" in dm["text"] and "completed" in dm["text"]


async def _tail(user: str, request: RunnerRequest, /) -> RunnerReply:
    """The runner's answer to `tail`: the last lines of the file, read as `user`."""
    return {
        "ok": True,
        "data": base64.b64encode(b"CUDA out of memory\n").decode(),
        "start": 0,
        "size": 19,
    }


async def test_a_failure_whose_output_is_shown_costs_one_writer_call_more(
    tmp_path: Path, slack: SlackStandIn
) -> None:
    """Job 108 fails: its DM shows the end of its output, read through the runner, which
    cannot happen inside the poll's transaction. The save leaves the batch (cursor unmoved);
    the output is read as soon as the poll is saved, and the batch enqueued in one more call:
    walk = source, worker, save, runner, enqueue, claim, Slack, record = 8."""
    bin_dir = tmp_path / "bin"
    _stand_in_slurm(bin_dir)
    _documents(bin_dir, None)
    config = _config(tmp_path, bin_dir)
    writer = CountingWriter(empty_database(tmp_path / "skybot.db"))
    sender = OutboxSender(writer, slack.web_client(), SenderPacing(per_channel_per_second=20))
    identity = IdentityDirectory(config.identity, writer)
    wing = await build_wing(config, config.default_cluster, writer, identity, sender.wake)
    # The wing's watchers, but with a runner that answers like skybot-runner without sudo.
    watchers = Watchers(
        wing.cluster, config, writer, identity, sender.wake, wing.cache.current, _tail
    )
    wing.poller.decisions = watchers.poll_dms
    then = (wing.cache.refresh, watchers.after_slurm_poll)
    try:
        assert await wing.poller.poll_jobs()
        for hook in then:
            await hook()
        _documents(bin_dir, time.time(), "FAILED")
        writer.taken()
        assert await wing.poller.poll_jobs()
        for hook in then:
            await hook()
        assert writer.taken() == ["save_poll", "notify_transitions", "decide", "decide"]
        report = await sender.send_due()
        assert writer.taken() == ["claim_next_due", "mark_sent", "claim_next_due"]
    finally:
        await wing.poller.close()
        wing.cache.close()
        writer.close()
    assert report.sent == 1
    (dm,) = slack.messages.values()
    assert "108" in dm["text"] and "CUDA out of memory" in dm["text"]
