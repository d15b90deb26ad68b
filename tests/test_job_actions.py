"""One action per job at a time (issue 27 items 5 and 7), without Slurm: the runner is a fake
that counts its calls; tests/test_double_cancel_cluster.py does the same on the real cluster."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from bot.config import IdentityConfig, load_config
from core.rate_limit import RateLimiter
from handlers.buttons.cancel import cancel_clicked
from handlers.buttons.move_to_overcap import move_clicked
from handlers.commands import command_table
from handlers.home import home_view
from handlers.identity import IdentityDirectory
from handlers.job_actions import ActionOutcome, JobActions
from handlers.services import Services
from store.writer import StoreWriter
from tests.support.asking import answer_with_services
from tests.support.factories import job, make_snapshot, make_view

VIEW = make_view(
    make_snapshot(
        jobs=[
            job(7, name="mine", state="PENDING"),
            job(8, user="bob", name="bobs"),
            job(20, name="task", array_job_id=20, array_task="1"),
            job(21, user="bob", name="task", array_job_id=20, array_task="2"),
        ]
    )
)


class SlowRunner:
    """A runner whose scancel takes a while, as sudo + Python + slurmctld do."""

    def __init__(self, answer: dict[str, Any] | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.answer = answer

    async def __call__(self, user: str, request: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((user, request))
        await asyncio.sleep(0.2)
        # As the runner answers: move-to-overcap says where the job went, cancel only which.
        where = {k: request[k] for k in ("partition", "account") if k in request}
        return self.answer or {"ok": True, "job_id": request["job_id"], **where}


def services_for(writer: StoreWriter, runner: SlowRunner) -> Services:
    links = {"T1/UALICE": "alice", "T1/UALICE2": "alice", "T1/UBOB": "bob"}
    identity = IdentityDirectory(IdentityConfig(links=links), writer)
    return Services(load_config(None), identity, runner, writer=writer, view=lambda: VIEW)


async def sky(services: Services, text: str, user_id: str = "UALICE") -> str:
    table = command_table()
    cluster_user = services.identity.lookup("T1", user_id)
    reply = await answer_with_services(
        table,
        VIEW,
        services,
        text,
        team_id="T1",
        user_id=user_id,
        cluster_user=cluster_user.cluster_user if cluster_user else None,
        now=1_010.0,
    )
    return reply.text


async def test_a_double_click_runs_one_scancel_and_both_clicks_get_its_outcome(
    writer: StoreWriter,
) -> None:
    runner = SlowRunner()
    services = services_for(writer, runner)
    first, second = await asyncio.gather(
        cancel_clicked(VIEW, services, "T1", "UALICE", "7"),
        cancel_clicked(VIEW, services, "T1", "UALICE", "7"),
    )
    assert runner.calls == [("alice", {"action": "cancel", "job_id": "7"})]
    assert first == second == "Cancelled job `7` `mine` (as `alice`)."
    # The snapshot still lists the job until the next poll: a later click is told, not re-run.
    third = await cancel_clicked(VIEW, services, "T1", "UALICE", "7")
    assert third == first and len(runner.calls) == 1


async def test_a_click_and_the_command_on_one_job_share_one_scancel(writer: StoreWriter) -> None:
    runner = SlowRunner()
    services = services_for(writer, runner)
    clicked, typed = await asyncio.gather(
        cancel_clicked(VIEW, services, "T1", "UALICE", "7"),
        sky(services, "cancel 7", user_id="UALICE2"),
    )
    assert len(runner.calls) == 1
    assert clicked == typed == "Cancelled job `7` `mine` (as `alice`)."


async def test_a_failed_cancel_is_not_remembered(writer: StoreWriter) -> None:
    runner = SlowRunner({"ok": False, "error": "scancel: error: Kill job error"})
    services = services_for(writer, runner)
    both = await asyncio.gather(*(sky(services, "cancel 7") for _ in range(2)))
    assert both == ["Slurm did not cancel job `7`: `scancel: error: Kill job error`"] * 2
    assert len(runner.calls) == 1
    await sky(services, "cancel 7")
    assert len(runner.calls) == 2  # trying again after a failure does try again


async def test_cancel_of_someone_elses_job_never_starts_the_runner(writer: StoreWriter) -> None:
    """Issue 27 item 7: `/sky cancel` ran scancel as the asker for bob's job, and slurmctld
    logged a "Security violation"; the button checked ownership first, the command did not."""
    runner = SlowRunner()
    services = services_for(writer, runner)
    services.limiter = RateLimiter(capacity=1)
    assert await sky(services, "cancel 8") == (
        "Job `8` belongs to `bob`, not to you (`alice`): skybot acts only as you, "
        "so nothing was done."
    )
    # An array id whose tasks are not all hers is refused too.
    assert (await sky(services, "cancel 20")).startswith("Job `20` belongs to `bob`")
    assert (await sky(services, "cancel 404")).startswith(
        "skybot sees no job `404` in the queue (its last look: 10 s ago), so nothing was cancelled."
    )
    assert runner.calls == []
    # Refusals start nothing, so they cost no token: her one token still cancels her own job.
    assert await sky(services, "cancel #7") == "Cancelled job `7` `mine` (as `alice`)."
    assert runner.calls == [("alice", {"action": "cancel", "job_id": "7"})]


async def test_different_actions_on_one_job_take_turns() -> None:
    actions = JobActions()
    order: list[str] = []

    def work(name: str) -> Any:
        async def run() -> ActionOutcome:
            order.append(f"{name} starts")
            await asyncio.sleep(0.05)
            order.append(f"{name} ends")
            return ActionOutcome(name, False)

        return run

    await asyncio.gather(
        actions.perform("skynet", "5", "cancel", work("cancel")),
        actions.perform("skynet", "5", "move", work("move")),
    )
    assert order == ["cancel starts", "cancel ends", "move starts", "move ends"]
    assert not actions.in_progress("skynet", "5", "cancel")


async def test_an_outcome_is_remembered_only_for_a_while() -> None:
    now = [0.0]
    actions = JobActions(clock=lambda: now[0], remember_seconds=60)
    runs = []

    async def cancel() -> ActionOutcome:
        runs.append(1)
        return ActionOutcome("Cancelled", True)

    await actions.perform("skynet", "5", "cancel", cancel, remember=True)
    assert actions.in_progress("skynet", "5", "cancel")
    now[0] = 61
    assert not actions.in_progress("skynet", "5", "cancel")
    await actions.perform("skynet", "5", "cancel", cancel, remember=True)
    assert len(runs) == 2
    # Unless asked to, an outcome is shared only while its action runs.
    await actions.perform("skynet", "6", "move", cancel)
    assert not actions.in_progress("skynet", "6", "move")


async def test_the_home_tab_after_a_cancel_shows_the_job_as_cancelled(writer: StoreWriter) -> None:
    """Issue 27 item 9: the tab republished with "Cancelled job 7" on top still listed job 7,
    with its Cancel button: the snapshot lists the job until the next poll."""
    services = services_for(writer, SlowRunner())
    outcome = await cancel_clicked(VIEW, services, "T1", "UALICE", "7")
    tab = await home_view(VIEW, services, command_table(), "T1", "UALICE", 1_010.0, outcome)
    text = json.dumps(tab["blocks"], ensure_ascii=False)
    assert "Cancelled job `7` `mine` (as `alice`)." in text
    assert "Cancelled just now, Slurm is ending them: `7` `mine`" in text
    buttons = [e["value"] for b in tab["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert buttons == ["20_1"]  # her other job keeps its button


async def test_a_move_clicked_during_a_cancel_waits_and_moves_nothing(writer: StoreWriter) -> None:
    runner = SlowRunner()
    services = services_for(writer, runner)
    cancelled, moved = await asyncio.gather(
        cancel_clicked(VIEW, services, "T1", "UALICE", "7"),
        move_clicked(VIEW, services, "T1", "UALICE", "7"),
    )
    assert cancelled == "Cancelled job `7` `mine` (as `alice`)."
    assert moved == "Job `7` was cancelled just now: nothing was moved."
    assert runner.calls == [("alice", {"action": "cancel", "job_id": "7"})]


async def test_a_task_of_a_pending_array_record_can_be_cancelled(writer: StoreWriter) -> None:
    """Slurm lists an array's pending tasks as one record (`30_[2-4]`): `/sky cancel 30_3`
    is hers by that record, and Slurm knows the task."""
    runner = SlowRunner()
    services = services_for(writer, runner)
    view = make_view(
        make_snapshot(
            jobs=[
                job(31, name="arr", array_job_id=30, array_task="1"),
                job(30, name="arr", state="PENDING", array_job_id=30, array_task="[2-4]"),
                job(40, user="bob", state="PENDING", array_job_id=40, array_task="[1-9]"),
            ]
        )
    )
    services.view = lambda: view
    assert await cancel_clicked(view, services, "T1", "UALICE", "30_3") == (
        "Cancelled job `30_3` `arr` (as `alice`)."
    )
    assert (await cancel_clicked(view, services, "T1", "UALICE", "40_2")).startswith(
        "Job `40_2` belongs to `bob`"
    )
    assert runner.calls == [("alice", {"action": "cancel", "job_id": "30_3"})]
