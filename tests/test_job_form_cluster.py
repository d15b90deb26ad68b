"""The job form on the real cluster (issue 43): the real bot over signed HTTP, the Slack
stand-in's modal, the real runner through sudo. A wrong GPU count, a time over the
partition's live MaxTime (set with scontrol here) and an unknown image are refused in the
modal with nothing submitted; a valid form gives exactly one job, running as alice with the
GPUs she asked for, and one DM with its id, as `/sky submit PATH` does."""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from msgspec.structs import replace

from bot.config import SlackConfig
from core.job_form import COMMAND, GPU_COUNT, GPU_TYPE, IMAGE, PLACE, TIME
from core.job_modal import DONE_CALLBACK, FORM_CALLBACK, REVIEW_CALLBACK
from tests.support.bot_process import SLACK_IDS, free_port, linked_bot, linked_bot_config
from tests.support.cluster import squeue_json, wait_for
from tests.support.slack_standin import OpenModal, SlackStandIn, slash_commands_envelope

pytestmark = pytest.mark.cluster

SECRET = "job-form-on-the-cluster"
PARTITION = "hoffman-lab"
ALICE = SLACK_IDS["alice"]
ALICE_DIR = Path("/srv/hoffman-lab/flash9/alice")


def _scontrol(*args: str) -> str:
    done = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def four_hours_at_most() -> Iterator[None]:
    """hoffman-lab's MaxTime is 4 h for the test (the lab partitions have none), then as it was."""
    before = re.search(r"MaxTime=(\S+)", _scontrol("show", "partition", PARTITION))
    assert before is not None
    _scontrol("update", f"PartitionName={PARTITION}", "MaxTime=04:00:00")
    yield
    _scontrol("update", f"PartitionName={PARTITION}", f"MaxTime={before[1]}")


def _alice_jobs() -> list[dict[str, object]]:
    return [j for j in squeue_json()["jobs"] if j.get("user_name") == "alice"]


async def _alice_jobs_now() -> list[dict[str, object]]:
    """From a worker thread: the bot runs on this event loop."""
    return await asyncio.to_thread(_alice_jobs)


async def _open(slack: SlackStandIn, url: str | None) -> OpenModal:
    """`/sky submit` as alice, over signed HTTP to `url`, else over Socket Mode: acked with
    nothing to show (the modal is the answer) within Slack's 3 s."""
    started = time.monotonic()
    if url is None:
        payload = slack.slash_command_payload(command="/sky", text="submit", user_id=ALICE)
        delivery = await slack.send_envelope(slash_commands_envelope(payload), timeout=3.0)
        assert not delivery.payload, delivery.payload
        trigger = payload["trigger_id"]
    else:
        signed = slack.signed_slash_command(SECRET, command="/sky", text="submit", user_id=ALICE)
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=signed.body, headers=signed.headers) as response,
        ):
            assert response.status == 200 and (await response.text()) == ""
        trigger = signed.payload["trigger_id"]
    assert time.monotonic() - started < 3.0
    [modal] = [m for m in slack.modals.values() if m.trigger_id == trigger]
    return modal


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_the_form_refuses_in_the_modal_and_submits_one_job_as_alice(
    mode: str, tmp_path: Path, clean_queue: None, checkout_runner: None, four_hours_at_most: None
) -> None:
    port = free_port()
    config = replace(linked_bot_config(tmp_path), slack=SlackConfig(mode=mode, http_port=port))
    url = f"http://127.0.0.1:{port}/slack/events" if mode == "http" else None
    async with linked_bot(config, SECRET) as slack:
        modal = await _open(slack, url)
        assert modal.view["callback_id"] == FORM_CALLBACK

        async def submit(**answers: str | None) -> dict[str, object] | None:
            return await slack.submit_view(
                modal, user_id=ALICE, answers=answers, url=url, signing_secret=SECRET
            )

        # Each of the two tasks (one per GPU) says who it runs as, then keeps its GPU.
        ran = "bash -c 'whoami > form-ran-$SLURM_PROCID.txt && sleep 300'"
        base = {PLACE: f"lab:{PARTITION}", GPU_TYPE: "a40", COMMAND: ran}

        # The limits poll may not have read the new MaxTime yet: the count is wrong anyway.
        async def refusal() -> dict[str, str] | None:
            answer = await submit(**base, **{GPU_COUNT: "5", TIME: "5:00:00"})
            assert answer is not None and answer["response_action"] == "errors", answer
            errors: dict[str, str] = answer["errors"]  # type: ignore[assignment]
            return errors if TIME in errors else None

        errors = await wait_for(refusal, 30, "the form to read the partition's new MaxTime")
        assert errors == {
            GPU_COUNT: "A a40 node has 4 GPUs at most: ask for 1 to 4.",
            TIME: f"{PARTITION} allows 04:00:00 at most (its MaxTime now): ask for that or less.",
        }
        answer = await submit(**base, **{GPU_COUNT: "2", TIME: "0:10:00", IMAGE: "ghost"})
        assert answer == {
            "response_action": "errors",
            "errors": {IMAGE: "There is no image `ghost` (see `/sky images`)."},
        }
        assert modal.open and modal.view["callback_id"] == FORM_CALLBACK
        assert await _alice_jobs_now() == []

        answer = await submit(**base, **{GPU_COUNT: "2", TIME: "0:10:00"})
        assert answer is not None and modal.view["callback_id"] == REVIEW_CALLBACK, answer
        assert await _alice_jobs_now() == []
        await submit()
        assert modal.view["callback_id"] == DONE_CALLBACK
        assert "Queued as #" in modal.view["blocks"][0]["text"]["text"]

        dm = await slack.wait_for_call(
            "chat.postMessage",
            timeout=60,
            predicate=lambda c: c.ok and "Slurm job *" in str(c.params.get("text")),
        )
        job_id = int(str(dm.params["text"]).split("Slurm job *", 1)[1].split("*", 1)[0])
        assert "the job form's script in `/srv/hoffman-lab/flash9/alice`" in dm.params["text"]

        def running() -> str | None:  # wait_for runs it in a worker thread
            shown = _scontrol("show", "job", "--oneliner", str(job_id))
            return shown if "JobState=RUNNING" in shown else None

        shown = await wait_for(running, 60, f"job {job_id} to run")
        assert "UserId=alice(" in shown and f"Partition={PARTITION} " in shown
        assert "gres/gpu:a40=2" in shown, shown
        assert f"WorkDir={ALICE_DIR} " in shown
        assert [j["job_id"] for j in await _alice_jobs_now()] == [job_id]
        # Both tasks ran, as alice, in the form's directory; the job still runs.
        said = [ALICE_DIR / f"form-ran-{task}.txt" for task in (0, 1)]
        await wait_for(lambda: all(p.exists() and p.read_text() for p in said), 30, "the tasks")
        assert [p.read_text() for p in said] == ["alice\n", "alice\n"]
        assert running() is not None
        await asyncio.sleep(2)  # a second DM, if any, would have come by now
        about = [
            c
            for c in slack.calls_to("chat.postMessage")
            if c.ok and f"Slurm job *{job_id}*" in str(c.params.get("text"))
        ]
        assert len(about) == 1


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    """What the form's jobs write in alice's directory goes with the test."""
    yield
    for leftover in (*ALICE_DIR.glob("my-job-*"), *ALICE_DIR.glob("form-ran-*.txt")):
        leftover.unlink(missing_ok=True)
