"""Job arrays as Slurm and its users see them (issue 40): one DM when the first task starts
(for those who asked for start DMs), one when the last task ends, whatever the array's size
or how its tasks' ends spread over polls; a DM per task only for those who asked for it."""

from __future__ import annotations

import json
from typing import Any

from bot.config import load_config
from core.array_notices import array_end_notice, ended_tasks
from core.failed_jobs import id_ranges, task_ids
from core.log_more import LOG_MORE
from core.records import Job
from scheduler.watchers.job_dms import process_transitions
from store.alerts import save_preference, save_starts_wanted
from store.arrays import save_tasks_wanted
from store.outbox import outbox_rows
from store.writer import StoreWriter
from tests.support.factories import CLUSTER, job
from tests.support.slurm_polls import save_slurm_poll

TEAM = "T1"
ARRAY = 5000
CONFIG = load_config(None)


class Links:
    def slack_users_of(self, cluster_user: str) -> list[tuple[str, str]]:
        return [(TEAM, "U1")] if cluster_user == "alice" else []


def task(n: int, state: str = "RUNNING", **fields: Any) -> Job:
    """Task n of the array: its own job id (above the array's own), started at 1000, one A40."""
    values: dict[str, Any] = {
        "name": "sweep",
        "array_job_id": ARRAY,
        "array_task": str(n),
        "state": state,
        "start_time": 1000,
        "gpus_by_type": {"a40": 1},
        "nodes": "clippy",
        "std_out": f"/home/alice/sweep-{n}.out",
    }
    if state != "RUNNING":
        values.update(end_time=1600, exit_code=0)
    values.update(fields)
    return job(ARRAY + 1 + n, **values)


def pending_rest(first: int, last: int) -> Job:
    """The array's record of its tasks not started yet (`5000_[first-last]`)."""
    return job(ARRAY, name="sweep", state="PENDING", array_job_id=ARRAY,
               array_task=f"{first}-{last}")  # fmt: skip


def failing(n: int, code: int) -> Job:
    return task(n, "FAILED", exit_code=code)


async def rows(writer: StoreWriter) -> list[dict[str, Any]]:
    return await writer.run(outbox_rows)


async def notify(writer: StoreWriter) -> int:
    return await process_transitions(writer, Links(), CONFIG, CONFIG.default_cluster)


async def test_thirty_tasks_ending_over_three_polls_with_three_failing_are_one_dm(
    writer: StoreWriter,
) -> None:
    """Issue 40: 30 tasks with 3 failing gave one summary with no exit code (and a DM per poll
    where the ends spread). Now: one DM when the last task ends, naming each failure."""
    running = [task(n) for n in range(1, 31)]
    await writer.run(save_slurm_poll, running, [], [], 1100.0)
    assert await notify(writer) == 0
    ends = {n: task(n, "COMPLETED") for n in range(1, 31)}
    ends[4], ends[9], ends[22] = failing(4, 3), failing(9, 3), failing(22, 1)
    for through, at in ((10, 1610.0), (20, 1620.0)):
        live = [ends[n] if n <= through else task(n) for n in range(1, 31)]
        await writer.run(save_slurm_poll, live, [], [], at)
        assert await notify(writer) == 0, "the array still runs: nothing to tell yet"
    await writer.run(save_slurm_poll, list(ends.values()), [], [], 1630.0)
    assert await notify(writer) == 1
    (row,) = await rows(writer)
    assert row["key"] == f"array:{CLUSTER}:{ARRAY}:end:{TEAM}:U1"
    lines = str(row["text"]).splitlines()
    assert lines[0] == f"📦 Array job {ARRAY} `sweep` ended: 30 tasks, 27 completed, 3 failed."
    assert lines[1] == f"Cluster `{CLUSTER}` · Partition `hoffman-lab` · GPUs per task `a40:1`"
    assert lines[2] == "failed with exit code 3: tasks 4, 9"
    assert lines[3] == "failed with exit code 1: task 22"
    assert lines[4].startswith("Runtime: 10 min from the first start to the last end; ")
    assert lines[4].endswith("5 h of task time in all · GPU-hours: 5.0")
    assert lines[5] == "Output of task 4: `/home/alice/sweep-4.out`"
    buttons = [e for b in row_blocks(row) if b["type"] == "actions" for e in b["elements"]]
    assert [b["text"]["text"] for b in buttons] == ["Show log of task 4", "Show log of task 9",
                                                    "Show log of task 22"]  # fmt: skip
    assert buttons[0]["action_id"] == f"{LOG_MORE}:{CLUSTER}/{ARRAY + 5}:out"
    # Decided again (a restart replays the batch): the same key, nothing new.
    await writer.run(lambda db: db.execute("UPDATE notify_cursors SET value = 0"))
    assert await notify(writer) == 0


def row_blocks(row: dict[str, Any]) -> list[dict[str, Any]]:
    return list(json.loads(str(row["blocks"])))


async def test_ten_thousand_tasks_ending_within_one_poll_cost_one_dm(writer: StoreWriter) -> None:
    """Issue 40: they were 5 digests of 2,000. A pending rest keeps the array open."""
    tasks = [task(n) for n in range(10_000)]
    await writer.run(save_slurm_poll, [*tasks, pending_rest(10_000, 10_099)], [], [], 1100.0)
    await notify(writer)
    ended = [task(n, "COMPLETED") for n in range(10_000)]
    await writer.run(save_slurm_poll, [*ended, pending_rest(10_000, 10_099)], [], [], 1610.0)
    assert await notify(writer) == 0, "100 tasks still pending"
    cancelled = pending_rest(10_000, 10_099)
    cancelled = job(ARRAY, **{**_fields(cancelled), "state": "CANCELLED", "end_time": 1700})
    await writer.run(save_slurm_poll, [*ended, cancelled], [], [], 1710.0)
    assert await notify(writer) == 1
    (row,) = await rows(writer)
    text = str(row["text"])
    assert "10100 tasks, 10000 completed, 100 cancelled." in text, text
    assert "cancelled: tasks 10000-10099" in text, text


def _fields(record: Job) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__slots__ if name != "job_id"}


async def test_those_who_ask_for_each_task_get_a_dm_per_task(writer: StoreWriter) -> None:
    await writer.run(save_tasks_wanted, TEAM, "U1", True, 0.0)
    await writer.run(save_slurm_poll, [task(n) for n in range(1, 31)], [], [], 1100.0)
    await notify(writer)
    ends = [failing(n, 2) if n == 7 else task(n, "COMPLETED") for n in range(1, 31)]
    await writer.run(save_slurm_poll, ends, [], [], 1610.0)
    assert await notify(writer) == 30, "one DM per task, not a summary"
    keys = sorted(str(r["key"]) for r in await rows(writer))
    assert keys[0].startswith(f"job:{CLUSTER}:{ARRAY + 2}:0:COMPLETED:")
    assert not [k for k in keys if k.startswith(("array:", "jobs:"))]


async def test_mail_type_array_tasks_on_the_job_is_honoured(writer: StoreWriter) -> None:
    """`--mail-type=ARRAY_TASKS`, where Slurm's record shows it (23.02 and later)."""
    running = [task(n, mail_array_tasks=True) for n in range(1, 9)]
    await writer.run(save_slurm_poll, running, [], [], 1100.0)
    await notify(writer)
    ended = [task(n, "COMPLETED", mail_array_tasks=True) for n in range(1, 9)]
    await writer.run(save_slurm_poll, ended, [], [], 1610.0)
    assert await notify(writer) == 8


async def test_a_fail_preference_hears_of_an_array_only_if_a_task_went_wrong(
    writer: StoreWriter,
) -> None:
    await writer.run(save_preference, TEAM, "U1", "fail", 0.0)
    await writer.run(save_slurm_poll, [task(n) for n in range(1, 4)], [], [], 1100.0)
    await notify(writer)
    await writer.run(save_slurm_poll, [task(n, "COMPLETED") for n in range(1, 4)], [], [], 1610)
    assert await notify(writer) == 0


async def test_tasks_that_left_squeue_while_sacct_was_down_keep_the_array_open(
    writer: StoreWriter,
) -> None:
    """A task's end held back by an accounting outage is not a task that ended: the end DM
    waits for sacct, and then counts it."""
    await writer.run(save_slurm_poll, [task(1), task(2)], [], [], 1100.0)
    await notify(writer)
    # Task 1 left squeue while sacct failed; task 2 is still listed, ended.
    await writer.run(save_slurm_poll, [task(2, "COMPLETED")], [], [], 1610.0, False)
    assert await notify(writer) == 0
    await writer.run(save_slurm_poll, [], [failing(1, 9)], [], 1620.0)
    assert await notify(writer) == 1
    (row,) = await rows(writer)
    assert "2 tasks, 1 completed, 1 failed." in str(row["text"])
    assert "failed with exit code 9: task 1" in str(row["text"])


async def test_an_arrays_first_start_is_one_start_dm(writer: StoreWriter) -> None:
    await writer.run(save_starts_wanted, TEAM, "U1", True, 0.0)
    await writer.run(save_slurm_poll, [pending_rest(0, 199)], [], [], 1100.0)
    started = [task(n, start_time=1150) for n in range(96)]
    await writer.run(save_slurm_poll, [*started, pending_rest(96, 199)], [], [], 1200.0)
    assert await notify(writer) == 1
    more = [task(n, start_time=1250) for n in range(96, 192)]
    await writer.run(save_slurm_poll, [*more, pending_rest(192, 199)], [], [], 1300.0)
    assert await notify(writer) == 0
    (row,) = await rows(writer)
    assert row["key"] == f"arraystart:{CLUSTER}:{ARRAY}:{TEAM}:U1"
    assert str(row["text"]).startswith(f"📦 Array job {ARRAY}: its first task started.")


def test_task_texts_and_ranges() -> None:
    assert task_ids("7") == [7]
    assert task_ids("0-3") == [0, 1, 2, 3]
    assert task_ids("1,3,5-7%4") == [1, 3, 5, 6, 7]
    assert task_ids("0-6:3") == [0, 3, 6]
    assert task_ids("`x`") == [] and task_ids(None) == []
    assert id_ranges([12, 3, 7, 8, 9]) == "3, 7-9, 12"
    assert id_ranges(range(0, 200, 2), most=3) == "0, 2, 4 and 97 more"


def test_an_array_end_notice_without_failures_has_no_buttons() -> None:
    records = [task(n, "COMPLETED") for n in range(3)]
    assert [t for t, _, _ in ended_tasks(records)] == [0, 1, 2]
    notice = array_end_notice(ARRAY, records, "skynet", 2000.0)
    assert notice.text.startswith(f"✅ Array job {ARRAY} `sweep` ended: 3 tasks, 3 completed.")
    assert [b["type"] for b in notice.blocks] == ["section"]


async def test_the_end_dm_comes_when_squeue_lets_go_of_completing_tasks(
    writer: StoreWriter,
) -> None:
    """Seen on 22.05 (1,001 tasks cancelled): sacct had every task's end while squeue still
    listed them completing. The ends were recorded then, and the array left the queue a poll
    later with no transition of its own: its end DM waits for that, then comes."""
    await writer.run(save_slurm_poll, [task(1), task(2)], [], [], 1100.0)
    await notify(writer)
    completing = [task(1, "COMPLETING"), task(2, "COMPLETING")]
    ended = [task(1, "CANCELLED"), task(2, "CANCELLED")]
    await writer.run(save_slurm_poll, completing, ended, [], 1610.0)
    assert await notify(writer) == 0
    await writer.run(save_slurm_poll, [], [], [], 1620.0)
    assert await notify(writer) == 1
    (row,) = await rows(writer)
    assert "2 tasks, 2 cancelled." in str(row["text"])
    assert await notify(writer) == 0
