"""Failure DMs carry the end of the job's output, read through the runner as the job's owner.

The runner here is a recording function with the runner's reply shape (the real runner, with
real sudo and files, is tested in tests/test_runner_tail_cluster.py and end to end in
tests/test_failure_dms_cluster.py): these tests pin down who is asked, for which jobs, what
the DM shows, and that a slow or failing read never holds the DM back.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from core.cluster_config import ClusterConfig
from scheduler.watchers import process_transitions
from store.alerts import save_log_tails_wanted, save_preference
from store.outbox import outbox_rows
from store.writer import StoreWriter
from tests.support.factories import CLUSTER, job
from tests.support.job_dm_inputs import Links, config_with
from tests.support.outbox_sender import TEAM
from tests.support.slurm_polls import save_slurm_poll

PATHS = {"std_out": "/o/%x-%j.out", "std_err": "/o/%x-%j.err", "work_dir": "/home/alice"}


class Runner:
    """Answers `tail` like skybot-runner, from a dict of path -> bytes or error sentence."""

    def __init__(self, files: dict[str, bytes | str], delay: float = 0.0) -> None:
        self.files = files
        self.delay = delay
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, user: str, request: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((user, request))
        await asyncio.sleep(self.delay)
        content = self.files.get(request["path"], "The file does not exist (yet, or any more).")
        if isinstance(content, str):
            return {"ok": False, "error": content}
        return {"ok": True, "data": base64.b64encode(content).decode(), "start": 0, "size": 99}


async def two_ends(writer: StoreWriter) -> None:
    """alice's job 7 `train` fails with exit code 3; her job 8 completes."""
    await writer.run(
        save_slurm_poll, [job(7, name="train", **PATHS), job(8, **PATHS)], [], [], 100.0
    )
    ended = [
        job(7, name="train", state="FAILED", exit_code=3, work_dir="/home/alice"),
        job(8, state="COMPLETED", work_dir="/home/alice"),
    ]
    await writer.run(save_slurm_poll, [], ended, [], 115.0)


async def dm_texts(writer: StoreWriter) -> dict[str, str]:
    return {row["key"].split(":")[4]: row["text"] for row in await writer.run(outbox_rows)}


ALICE = Links({"alice": [(TEAM, "U1")]})


async def test_a_failure_dm_shows_stderr_and_stdout_read_as_the_owner(
    writer: StoreWriter,
) -> None:
    await two_ends(writer)
    runner = Runner(
        {
            "/o/train-7.err": b"Traceback (most recent call last):\nValueError: <!channel> ```x```",
            "/o/train-7.out": b"epoch 1\nepoch 2\n",
        }
    )
    assert (
        await process_transitions(
            writer, ALICE, config_with(), ClusterConfig(CLUSTER), runner=runner
        )
        == 2
    )
    # Asked once per file, as alice, for the failed job only (not the completed one).
    assert [(u, r["action"], r["path"]) for u, r in runner.calls] == [
        ("alice", "tail", "/o/train-7.err"),
        ("alice", "tail", "/o/train-7.out"),
    ]
    assert runner.calls[0][1]["max_lines"] == 15
    texts = await dm_texts(writer)
    failed = texts["FAILED"]
    assert "*stderr* `/o/train-7.err`, last 2 lines of 99B:\n```\nTraceback" in failed
    # Whatever the job printed stays inert inside the block.
    assert "ValueError: &lt;!channel&gt; \u02cb\u02cb\u02cbx\u02cb\u02cb\u02cb\n```" in failed
    assert "*stdout* `/o/train-7.out`, last 2 lines of 99B:\n```\nepoch 1\nepoch 2\n```" in failed
    assert "```" not in texts["COMPLETED"]
    blocks = [row["blocks"] for row in await writer.run(outbox_rows) if "FAILED" in row["key"]]
    assert "epoch 2" in str(blocks)


async def test_one_file_for_both_and_unreadable_files_give_one_line(writer: StoreWriter) -> None:
    await writer.run(save_slurm_poll, [job(7, name="t", work_dir="/w")], [], [], 100.0)
    await writer.run(
        save_slurm_poll, [], [job(7, name="t", state="TIMEOUT", work_dir="/w")], [], 115.0
    )
    runner = Runner({"/w/slurm-7.out": "The file is a FIFO; skybot reads only regular files."})
    await process_transitions(writer, ALICE, config_with(), ClusterConfig(CLUSTER), runner=runner)
    assert [r["path"] for _, r in runner.calls] == ["/w/slurm-7.out"]
    text = (await dm_texts(writer))["TIMEOUT"]
    assert text.endswith(
        "*Output* `/w/slurm-7.out`: not shown: "
        "`The file is a FIFO; skybot reads only regular files.`"
    )


async def test_users_and_admins_can_turn_it_off(writer: StoreWriter) -> None:
    await two_ends(writer)
    await writer.run(save_log_tails_wanted, TEAM, "U1", False, 0.0)
    runner = Runner({"/o/train-7.err": b"secret\n"})
    await process_transitions(writer, ALICE, config_with(), ClusterConfig(CLUSTER), runner=runner)
    assert runner.calls == []  # not even read
    assert "secret" not in (await dm_texts(writer))["FAILED"]


async def test_site_wide_off_and_unwanted_dms_read_nothing(writer: StoreWriter) -> None:
    await two_ends(writer)
    runner = Runner({"/o/train-7.err": b"secret\n"})
    await process_transitions(
        writer, ALICE, config_with(log_tail_lines=0), ClusterConfig(CLUSTER), runner=runner
    )
    assert runner.calls == []
    assert "secret" not in (await dm_texts(writer))["FAILED"]


async def test_nobody_who_would_not_get_the_dm_causes_a_read(writer: StoreWriter) -> None:
    await two_ends(writer)
    await writer.run(save_preference, TEAM, "U1", "preempt", 0.0)
    runner = Runner({})
    await process_transitions(writer, ALICE, config_with(), ClusterConfig(CLUSTER), runner=runner)
    assert runner.calls == [] and await writer.run(outbox_rows) == []
    # And bob, who is not linked to alice's account, is never the reader nor the receiver.
    await process_transitions(
        writer, Links({"bob": [(TEAM, "U2")]}), config_with(), ClusterConfig(CLUSTER), runner=runner
    )
    assert runner.calls == []


async def test_a_runner_that_hangs_costs_a_bounded_wait_not_the_dm(writer: StoreWriter) -> None:
    await two_ends(writer)
    runner = Runner({"/o/train-7.err": b"LATE-BYTES\n"}, delay=3600)
    config = config_with(log_tail_seconds=0.1)
    assert (
        await process_transitions(writer, ALICE, config, ClusterConfig(CLUSTER), runner=runner) == 2
    )
    text = (await dm_texts(writer))["FAILED"]
    assert "*stderr* `/o/train-7.err`: not shown: `it could not be read within 0.1 s`" in text
    assert "LATE-BYTES" not in text
