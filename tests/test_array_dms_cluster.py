"""Job arrays on the real cluster (22.05 on the host; 24.11 in its lane), through the real bot
and the Slack stand-in (issue 40): an array's owner gets one DM when its last task ends, naming
the failed tasks with their exit codes; a DM per task only when asked for; a big array
cancelled at once is one DM too."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from msgspec.structs import replace

from tests.support.bot_process import (
    linked_bot,
    linked_bot_config,
    wait_for_slurm_poll,
    wait_for_slurm_polls_acted_on,
)
from tests.support.cluster import sbatch_async, scancel_async, squeue_json, wait_for
from tests.support.slack_standin import SlackStandIn

pytestmark = pytest.mark.cluster

FAILING = {17: 3, 101: 4, 150: 5}


def _script(name: str, array: str, body: str, *options: str) -> str:
    """An array job script of alice's (1 CPU per task, 96 tasks at a time on 3 nodes)."""
    path = Path(f"/tmp/skybot-array-{name}-{os.getpid()}.sh")
    extra = "".join(f"#SBATCH {option}\n" for option in options)
    path.write_text(
        "#!/bin/bash\n"
        f"#SBATCH -p debug -A hoffman-lab -c 1 -t 5 -J {name} --array={array}\n"
        f"#SBATCH -o /tmp/skybot-array-{name}-%A_%a.out\n"
        f"{extra}{body}\n"
    )
    path.chmod(0o644)
    return str(path)


def _failing_body() -> str:
    cases = " ".join(f"{task}) exit {code};;" for task, code in FAILING.items())
    return f"sleep 2\ncase $SLURM_ARRAY_TASK_ID in {cases} esac"


def _texts(slack: SlackStandIn, pattern: str) -> list[str]:
    found = re.compile(pattern)
    return [
        str(call.params.get("text"))
        for call in slack.calls_to("chat.postMessage")
        if call.ok and found.search(str(call.params.get("text")))
    ]


def _array_dms(slack: SlackStandIn, array_id: int) -> list[str]:
    """Every DM about the array: its own, or one of its tasks' (`Job `1234_5``)."""
    return _texts(slack, rf"Array job {array_id}\b|Job `{array_id}_[0-9]+`")


async def _settled(database: str) -> None:
    """Two more polls acted on: whatever was still to be told has been enqueued and sent."""
    await wait_for_slurm_polls_acted_on(database, 2)


async def test_200_tasks_with_3_failing_end_in_one_dm_naming_them(
    tmp_path: Path, clean_queue: None
) -> None:
    config = linked_bot_config(tmp_path)
    async with linked_bot(config) as slack:
        array_id = await sbatch_async("alice", _script("arr200", "0-199", _failing_body()))
        await wait_for(lambda: _texts(slack, rf"Array job {array_id}\b"), 240, "the end DM")
        await _settled(config.database.path)
    (dm,) = _array_dms(slack, array_id)
    assert f"Array job {array_id} `arr200` ended: 200 tasks, 197 completed, 3 failed." in dm, dm
    for task, code in FAILING.items():
        assert f"failed with exit code {code}: task {task}" in dm, dm
    assert "GPU-hours: 0.0" in dm and "Runtime: " in dm, dm
    buttons = [
        element["text"]["text"]
        for call in slack.calls_to("chat.postMessage")
        if f"Array job {array_id}" in str(call.params.get("text"))
        for block in call.params.get("blocks") or []
        if block["type"] == "actions"
        for element in block["elements"]
    ]
    assert buttons == [f"Show log of task {task}" for task in FAILING], buttons


async def test_those_who_ask_get_a_dm_per_task(tmp_path: Path, clean_queue: None) -> None:
    """`/sky notify tasks on`: 200 tasks, 200 DMs (paced at 50 a second per channel here, so
    the test does not wait 200 s for Slack's one a second)."""
    config = linked_bot_config(tmp_path)
    # Slack's pace (one a second per channel, 200 a minute in all) would take minutes.
    fast = replace(
        config.notifications, messages_per_second_per_channel=50.0, messages_per_minute=6000
    )
    config = replace(config, notifications=fast)
    async with linked_bot(config) as slack:
        answer = await slack.slash_command_answer(
            command="/sky", text="notify tasks on", user_id="UALICE"
        )
        assert "a DM for each task" in str(answer.get("text"))
        array_id = await sbatch_async("alice", _script("each", "0-199", _failing_body()))
        await wait_for(lambda: len(_array_dms(slack, array_id)) >= 200, 300, "200 task DMs")
        await _settled(config.database.path)
    dms = _array_dms(slack, array_id)
    assert len(dms) == 200, len(dms)
    assert not [dm for dm in dms if f"Array job {array_id}" in dm]
    failed = [dm for dm in dms if "failed with exit code" in dm]
    assert sorted(failed) == sorted(
        dm for dm in dms for task in FAILING if f"`{array_id}_{task}`" in dm
    ), failed
    assert len(failed) == 3, failed


async def test_a_big_array_cancelled_at_once_is_one_dm(tmp_path: Path, clean_queue: None) -> None:
    """The largest array the test cluster takes (MaxArraySize 1001): 96 tasks running, the
    rest pending, all cancelled within one poll."""
    config = linked_bot_config(tmp_path)
    async with linked_bot(config) as slack:
        array_id = await sbatch_async("alice", _script("big", "0-1000", "sleep 600"))

        def running() -> bool:
            jobs = squeue_json()["jobs"]
            return sum(1 for j in jobs if j.get("job_state") == "RUNNING") >= 96

        await wait_for(running, 120, "96 tasks to run")
        await wait_for_slurm_poll(config.database.path, acted_on=True)
        await scancel_async(str(array_id))
        await wait_for(lambda: _texts(slack, rf"Array job {array_id}\b"), 120, "the end DM")
        await _settled(config.database.path)
    (dm,) = _array_dms(slack, array_id)
    assert f"Array job {array_id} `big` ended: 1001 tasks, 1001 cancelled." in dm, dm


async def test_mail_type_array_tasks_where_slurm_shows_it(
    tmp_path: Path, clean_queue: None
) -> None:
    """`--mail-type=ARRAY_TASKS` asks for a DM per task where squeue shows mail_type (23.02
    and later: the 24.11 lane); 22.05's squeue --json does not, and its arrays get one DM.
    (24.11 got one DM until the slim decode kept `mail_type`: core/slurm_decode.py.)"""
    config = linked_bot_config(tmp_path)
    async with linked_bot(config) as slack:
        # Long enough for a poll to see each task in squeue: a task seen only by sacct (it
        # started and ended between two polls) cannot show what mail it asked for.
        script = _script("mailed", "0-5", "sleep 10", "--mail-type=ARRAY_TASKS,END")
        array_id = await sbatch_async("alice", script)
        shows = any("mail_type" in job for job in squeue_json(active_only=False)["jobs"])
        wanted = 6 if shows else 1
        await wait_for(lambda: len(_array_dms(slack, array_id)) >= wanted, 60, "the DMs")
        await _settled(config.database.path)
    assert len(_array_dms(slack, array_id)) == wanted, _array_dms(slack, array_id)
