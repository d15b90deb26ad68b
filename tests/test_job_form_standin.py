"""The job form through the Slack stand-in (issue 43), over signed HTTP as Slack sends it:
`/sky submit` opens the modal with the command's trigger inside Slack's 3 s, a wrong GPU count,
a time over the partition's live limit, an unknown image and a bad directory are refused in
the modal (`response_action: errors`, nothing queued), and a reviewed form is queued once, its
script kept for the runner to hand to sbatch. The bot's Bolt app runs in this process, on a
snapshot built here (no Slurm: tests/test_job_form_cluster.py is the same on the cluster)."""

from __future__ import annotations

import copy
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import sqlite_utils
from msgspec.structs import replace

from bot.app import build_app, serve_http
from bot.config import IdentityConfig, Secrets, SlackConfig, load_config
from core.job_form import GPU_COUNT, GPU_TYPE, IMAGE, TIME, WORKDIR
from core.job_modal import DONE_CALLBACK, FORM_CALLBACK, REVIEW_CALLBACK
from core.records import ContainerImage, LabCap
from core.slurm_limits import PartitionLimits, SlurmLimits
from handlers.clusters import single_desk
from handlers.identity import IdentityDirectory
from handlers.services import Services
from store.reader import SnapshotCache
from store.writer import StoreWriter
from tests.support.bot_process import free_port
from tests.support.factories import make_snapshot, make_view, node
from tests.support.slack_standin import OpenModal, SlackStandIn, SlackUser

SECRET = "job-form-secret"
ACK_SECONDS = 3.0


@dataclass
class Form:
    slack: SlackStandIn
    url: str
    database: Path
    woken: list[int]

    async def open(self, user_id: str = "UALICE") -> tuple[str, OpenModal | None]:
        """`/sky submit` as Slack POSTs it: (the ack's text, "" when empty; the modal)."""
        signed = self.slack.signed_slash_command(
            SECRET, command="/sky", text="submit", user_id=user_id
        )
        started = time.monotonic()
        async with (
            aiohttp.ClientSession() as session,
            session.post(self.url, data=signed.body, headers=signed.headers) as response,
        ):
            assert response.status == 200
            body = await response.text()
        assert time.monotonic() - started < ACK_SECONDS
        opened = [c for c in self.slack.calls_to("views.open") if c.ok]
        trigger = signed.payload["trigger_id"]
        modal = next((m for m in self.slack.modals.values() if m.trigger_id == trigger), None)
        assert len(opened) == len(self.slack.modals)
        return body, modal

    async def submit(self, modal: OpenModal, **answers: str | None) -> dict[str, Any] | None:
        return await self.slack.submit_view(
            modal, user_id="UALICE", answers=answers, url=self.url, signing_secret=SECRET
        )

    def submissions(self) -> list[dict[str, Any]]:
        return list(sqlite_utils.Database(self.database).query("SELECT * FROM submissions"))


@pytest.fixture
async def form(tmp_path: Path) -> AsyncIterator[Form]:
    port = free_port()
    base = load_config(None)
    config = replace(
        base,
        slack=SlackConfig(mode="http", http_port=port),
        identity=IdentityConfig(links={"T0STANDIN/UALICE": "alice"}),
    )
    snapshot = make_snapshot(
        time.time(),
        nodes=(node("clippy", "a40", cpus=32), node("baymax", "2080_ti", cpus=32)),
        caps=(LabCap("hoffman-lab", 4),),
        members={"hoffman-lab": frozenset({"alice"})},
        images=(ContainerImage("nvcr.io_nvidia_pytorch_23.12-py3"),),
        limits=SlurmLimits(partitions=(PartitionLimits("hoffman-lab", 240),)),
    )
    view = make_view(snapshot, cluster=config.default_cluster)
    database = tmp_path / "skybot.db"
    writer = StoreWriter(database)
    woken: list[int] = []

    class Queue:
        def wake(self) -> None:
            woken.append(1)

    async def no_runner(user: str, request: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("the form queues; the submission worker runs the runner")

    identity = IdentityDirectory(config.identity, writer)
    services = Services(
        config, identity, no_runner, submissions=Queue(), writer=writer, view=lambda: view
    )
    cache = SnapshotCache(database, config.default_cluster.name, ())
    desks = single_desk(config, lambda: view, services)
    try:
        async with SlackStandIn(users=[SlackUser("UALICE", "alice")]) as slack:
            app = build_app(
                config,
                Secrets(signing_secret=SECRET),
                cache,
                services,
                slack.web_client(),
                desks=desks,
            )
            runner = await serve_http(app, "127.0.0.1", port)
            try:
                yield Form(slack, f"http://127.0.0.1:{port}/slack/events", database, woken)
            finally:
                await runner.cleanup()
    finally:
        writer.close()


async def test_wrong_fields_are_refused_in_the_modal_and_a_reviewed_form_is_queued_once(
    form: Form,
) -> None:
    said, modal = await form.open()
    assert said == "" and modal is not None  # an empty ack: the modal is the answer
    assert modal.view["callback_id"] == FORM_CALLBACK
    assert '"cluster": "skynet"' in modal.view["private_metadata"]

    wrong = {
        GPU_COUNT: ("9", "A 2080_ti node has 4 GPUs at most: ask for 1 to 4."),
        TIME: ("5:00:00", "hoffman-lab allows 04:00:00 at most (its MaxTime now): ask for"),
        IMAGE: ("ghost", "There is no image `ghost` (see `/sky images`)."),
        WORKDIR: ("/etc", "`/etc` is not a directory skybot submits from"),
    }
    for field, (typed, error) in wrong.items():
        answer = await form.submit(modal, **{field: typed})
        assert answer is not None and answer["response_action"] == "errors", answer
        assert list(answer["errors"]) == [field]
        assert answer["errors"][field].startswith(error), answer
        assert modal.open and modal.view["callback_id"] == FORM_CALLBACK
    assert form.submissions() == []

    answer = await form.submit(modal, **{GPU_TYPE: "a40", GPU_COUNT: "2", TIME: "2:00:00"})
    assert answer is not None and answer["response_action"] == "update", answer
    assert modal.view["callback_id"] == REVIEW_CALLBACK
    shown = "\n".join(b["text"]["text"] for b in modal.view["blocks"] if b["type"] == "section")
    assert "#SBATCH --gpus-per-node=a40:2" in shown and "#SBATCH --time=02:00:00" in shown
    assert form.submissions() == []  # a review queues nothing

    review = copy.deepcopy(modal)
    answer = await form.submit(modal)
    assert answer is not None and modal.view["callback_id"] == DONE_CALLBACK
    assert "Queued as #1: the job form's script in" in modal.view["blocks"][0]["text"]["text"]
    [row] = form.submissions()
    assert row["cluster"] == "skynet" and row["cluster_user"] == "alice"
    assert row["script"] == "/srv/hoffman-lab/flash9/alice" and row["state"] == "queued"
    assert row["options"] == '{"partition": "hoffman-lab"}'
    assert "#SBATCH --gpus-per-node=a40:2\n" in row["script_text"]
    assert "\nsrun -u python -u train.py\n" in row["script_text"]
    assert form.woken == [1]
    # Slack sending the same Submit again (a second click after a slow ack): the same one.
    await form.submit(review)
    assert "Queued as #1: " in review.view["blocks"][0]["text"]["text"]
    assert [r["id"] for r in form.submissions()] == [1]
    # A new form is a new submission.
    _, again = await form.open()
    assert again is not None and again.view["id"] != modal.view["id"]
    await form.submit(again, **{GPU_TYPE: "a40", GPU_COUNT: "1"})
    await form.submit(again)
    assert [r["id"] for r in form.submissions()] == [1, 2]


async def test_a_form_slack_would_not_open_is_said_and_an_unknown_user_gets_none(
    form: Form,
) -> None:
    form.slack.fail_next("views.open", error="expired_trigger_id")
    said, modal = await form.open()
    assert modal is None and "Slack did not open the job form in time" in said
    said, modal = await form.open("UNOBODY")
    assert modal is None and "I don't know your cluster account yet" in said
