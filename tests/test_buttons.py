"""What a Cancel click does, after every check (the real runner: tests/test_buttons_cluster.py)."""

from __future__ import annotations

from typing import Any

from bot.config import IdentityConfig, load_config
from core.buttons.cancel import cancel_block
from handlers.buttons.cancel import cancel_clicked
from handlers.identity import IdentityDirectory
from handlers.services import Services
from store.writer import StoreWriter
from tests.support.factories import job, make_snapshot, make_view


class Runner:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, user: str, request: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((user, request))
        return {"ok": True, "job_id": request["job_id"]}


VIEW = make_view(
    make_snapshot(
        jobs=[
            job(7, name="mine", state="PENDING"),
            job(8, user="bob", name="bobs"),
            job(9, state="COMPLETED"),
        ]
    )
)


async def click(writer: StoreWriter, runner: Runner, slack_user: str, label: str) -> str:
    links = {"T1/UALICE": "alice", "T1/UBOB": "bob"}
    identity = IdentityDirectory(IdentityConfig(links=links), writer)
    services = Services(load_config(None), identity, runner, writer=writer)
    return await cancel_clicked(VIEW, services, "T1", slack_user, label)


async def test_the_clickers_own_account_acts_and_nobody_elses(writer: StoreWriter) -> None:
    runner = Runner()
    assert await click(writer, runner, "UBOB", "7") == (
        "Job `7` belongs to `alice`, not to you (`bob`): skybot acts only as you, "
        "so nothing was done."
    )
    assert await click(writer, runner, "UNOBODY", "7") == (
        "skybot acts only as your own cluster account: link it first with `/sky link USER`."
    )
    assert runner.calls == []
    assert await click(writer, runner, "UALICE", "7") == "Cancelled job `7` `mine` (as `alice`)."
    assert runner.calls == [("alice", {"action": "cancel", "job_id": "7"})]


async def test_stale_and_forged_buttons_do_nothing(writer: StoreWriter) -> None:
    runner = Runner()
    gone = "is no longer running or pending: there is nothing to cancel."
    assert await click(writer, runner, "UALICE", "9") == f"Job `9` {gone}"
    assert await click(writer, runner, "UALICE", "404") == f"Job `404` {gone}"
    assert await click(writer, runner, "UALICE", "7;rm -rf") == (
        "That button does not name a job skybot can act on."
    )
    assert runner.calls == []


def test_buttons_only_for_ids_scancel_takes() -> None:
    odd = job(5, array_job_id=5, array_task="1-3%2")
    assert cancel_block(make_view(make_snapshot()), [odd]) == []
    (block,) = cancel_block(make_view(make_snapshot()), [job(6), odd])
    assert [e["value"] for e in block["elements"]] == ["6"]
