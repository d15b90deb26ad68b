"""One poll, one transaction (store/poll_save.py): its rows, its transitions, the labs' usage
and the job DMs they decide commit together or not at all, and a failing decision never
costs the poll its save.

A kill -9 during the writer call is a transaction never committed: here, something that no
`except Exception` catches, raised after the DMs were enqueued and before the commit.
The real process killed mid-poll is tests/test_crash_dms_cluster.py.
"""

from __future__ import annotations

import pytest
import sqlite_utils

from bot.config import load_config
from core.cluster_config import ClusterConfig
from core.lab_usage import LabUsage
from core.snapshot_rows import SlurmChanges
from core.transitions import merge_observations
from scheduler.watchers.job_dms import process_transitions
from scheduler.watchers.poll_dms import Decided, decide_poll_dms
from store.alerts import load_cursor
from store.outbox import outbox_rows
from store.poll_save import PollToSave, UsageHistory, save_poll
from store.writer import StoreWriter
from tests.support.factories import CLUSTER, job
from tests.support.slurm_polls import save_slurm_poll

TEAM = "T1"
LINKS = {"alice": [(TEAM, "U1")]}
CONFIG = load_config(None)


class Links:
    def slack_users_of(self, cluster_user: str) -> list[tuple[str, str]]:
        return LINKS.get(cluster_user, [])


def ends(at: float) -> PollToSave:
    """A poll in which sacct says alice's jobs 7 (failed) and 8 (completed) ended."""
    ended = [job(7, state="FAILED", exit_code=3), job(8, state="COMPLETED")]
    changes = SlurmChanges(
        full=True,
        job_rows=(),
        gone_job_ids=(),
        node_rows=(),
        gone_nodes=(),
        observed=list(merge_observations([], ended).values()),
    )
    usage = [LabUsage("hoffman-lab", "hoffman-lab", None, 0)]
    return PollToSave(changes, at, None, usage, UsageHistory(30, 90.0))


def decision(db: sqlite_utils.Database) -> Decided:
    return decide_poll_dms(db, ClusterConfig(CLUSTER), LINKS, CONFIG, reads_output=False)


def saved_state(db: sqlite_utils.Database) -> tuple[int, int, int, int]:
    """(transitions, usage samples, DMs, cursor) as committed."""

    def count(table: str) -> int:
        return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    return (
        count("job_transitions"),
        count("lab_usage_history"),
        len(outbox_rows(db)),
        load_cursor(db, CLUSTER),
    )


async def running(writer: StoreWriter) -> None:
    await writer.run(save_slurm_poll, [job(7), job(8)], [], [], 100.0)


async def test_the_poll_its_usage_and_its_dms_commit_in_one_call(writer: StoreWriter) -> None:
    await running(writer)
    before = await writer.run(saved_state)
    saved = await writer.run(save_poll, CLUSTER, ends(115.0), decision)
    assert [t.to_state for t in saved.transitions] == ["FAILED", "COMPLETED"]
    assert saved.decided == Decided(added=2)
    transitions, samples, dms, cursor = await writer.run(saved_state)
    assert (transitions, samples, dms) == (before[0] + 2, before[1] + 1, 2) and cursor > 0


async def test_killed_before_the_commit_leaves_none_of_it_and_the_replay_tells_once(
    writer: StoreWriter,
) -> None:
    await running(writer)
    before = await writer.run(saved_state)

    def killed(db: sqlite_utils.Database) -> None:
        decision(db)
        assert len(outbox_rows(db)) == 2  # enqueued, not committed
        raise SystemExit("kill -9")

    with pytest.raises(SystemExit):
        await writer.run(save_poll, CLUSTER, ends(115.0), killed)
    assert await writer.run(saved_state) == before
    # The bot starts again and sacct reports the same ends: each DM once.
    await writer.run(save_poll, CLUSTER, ends(130.0), decision)
    await writer.run(save_poll, CLUSTER, ends(145.0), decision)
    assert sorted(r["key"].split(":")[4] for r in await writer.run(outbox_rows)) == [
        "COMPLETED",
        "FAILED",
    ]


async def test_a_failing_decision_costs_the_poll_nothing_and_its_dms_come_later(
    writer: StoreWriter, caplog: pytest.LogCaptureFixture
) -> None:
    await running(writer)
    before = await writer.run(saved_state)

    def broken(db: sqlite_utils.Database) -> Decided:
        decision(db)
        raise ValueError("a bug in deciding")

    saved = await writer.run(save_poll, CLUSTER, ends(115.0), broken)
    assert saved.decided is None and "a bug in deciding" in caplog.text
    transitions, samples, dms, cursor = await writer.run(saved_state)
    # The poll and its usage are saved; the DMs it enqueued were undone with the cursor.
    assert (transitions, samples, dms, cursor) == (before[0] + 2, before[1] + 1, 0, before[3])
    # What the watchers' after-poll hook runs then tells them, once.
    cluster = ClusterConfig(CLUSTER)
    assert await process_transitions(writer, Links(), CONFIG, cluster) == 2
    assert await process_transitions(writer, Links(), CONFIG, cluster) == 0
