"""Move to overcap: when `/sky why` offers it (core/overcap_move.py), and what a click
does after every check (handlers/buttons/move_to_overcap.py). The real runner, Slack stand-in
and cluster: tests/test_overcap_button_cluster.py."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from bot.config import IdentityConfig, load_config
from core.overcap_move import offers_move_to_overcap, overcap_nodes_that_fit
from core.records import HetComponent, Job, LabCap
from core.view import ClusterView
from handlers.buttons.move_to_overcap import move_clicked
from handlers.commands import command_table
from handlers.commands.common import overcap_flags
from handlers.identity import IdentityDirectory
from handlers.services import Services
from store.writer import StoreWriter
from tests.support.asking import answer_from_view
from tests.support.factories import job, make_snapshot, make_view, node

# hoffman-lab (cap 4) has all its GPUs in use; clippy has 3 idle a40s on overcap.
RUNNING = [
    job(1, gpus_by_type={"a40": 2}, nodes="clippy"),
    job(2, user="bob", gpus_by_type={"a40": 2}, nodes="clippy"),
]
WAITING = job(7, name="train", state="PENDING", reason="AssocGrpGRES", gpus_by_type={"a40": 2})


def cluster(*jobs: Job, nodes: tuple[Any, ...] | None = None) -> ClusterView:
    return make_view(
        make_snapshot(
            jobs=(*RUNNING, *jobs),
            nodes=nodes or (node("clippy", "a40", total=7, used=4), node("xaea-12", "rtx_6000")),
            caps=(LabCap("hoffman-lab", 4),),
            members={"hoffman-lab": frozenset({"alice", "bob"})},
        )
    )


def pending(**fields: Any) -> Job:
    return job(
        7, **{"state": "PENDING", "reason": "AssocGrpGRES", "gpus_by_type": {"a40": 2}, **fields}
    )


# ----------------------------------------------------------------------------- the decision


def test_offered_to_the_owner_of_a_job_at_its_labs_cap_that_fits_idle_overcap_gpus() -> None:
    assert overcap_nodes_that_fit(cluster(WAITING), WAITING) == [("clippy", {"a40": 3})]
    assert offers_move_to_overcap(cluster(WAITING), WAITING, "alice")
    # A lab cap set on a QOS reads QOSGrpGRES; Slurm may add detail after a comma.
    qos = pending(reason="QOSGrpGRES")
    assert offers_move_to_overcap(cluster(qos), qos, "alice")
    untyped = pending(gpus_by_type={"": 3})
    assert offers_move_to_overcap(cluster(untyped), untyped, "alice")


@pytest.mark.parametrize(
    ("waiting", "caller"),
    [
        (pending(), "bob"),  # someone else's job
        (pending(), None),  # an unlinked asker
        (pending(reason="Resources"), "alice"),  # not the cap: the cluster is full
        (pending(reason="AssocMaxWallDurationPerJobLimit"), "alice"),  # overcap would not help
        (pending(reason="JobHeldUser"), "alice"),
        (pending(state="RUNNING", reason=""), "alice"),
        (pending(account="overcap", partition="overcap"), "alice"),  # already there
        (pending(account="some-class"), "alice"),  # not a lab's account
        (pending(gpus_by_type={"a40": 4}), "alice"),  # only 3 idle a40s
        (pending(gpus_by_type={"rtx_6000": 5}), "alice"),  # xaea-12 has 4
        (pending(gpus_by_type={}), "alice"),  # asks for no GPUs: no idle GPUs to point at
        (pending(array_job_id=7, array_task="[1-4]"), "alice"),  # the runner moves single jobs
        # A het job's components have partitions and accounts of their own.
        (pending(het_job_id=7, het_components=(HetComponent(0, 7, "PENDING"),)), "alice"),
    ],
)
def test_not_offered(waiting: Job, caller: str | None) -> None:
    assert not offers_move_to_overcap(cluster(waiting), waiting, caller)


def test_not_offered_when_the_idle_gpus_are_outside_overcap() -> None:
    lab_only = node("clippy", "a40", total=7, used=4, partitions=("hoffman-lab", "debug"))
    assert not offers_move_to_overcap(cluster(WAITING, nodes=(lab_only,)), WAITING, "alice")


# ----------------------------------------------------------------------------- /sky why


POINTER = "*Move to overcap* below moves it there as it is, with the same job id."


def buttons(view: ClusterView, text: str, cluster_user: str | None) -> list[dict[str, Any]]:
    reply = answer_from_view(command_table(), view, text, team_id="T1", user_id="U1",
                     cluster_user=cluster_user, now=1_010.0)  # fmt: skip
    found = [e for b in reply.blocks if b["type"] == "actions" for e in b["elements"]]
    # The answer's words point at the button exactly when there is one.
    assert (POINTER in reply.text) is bool(found)
    return found


def test_why_shows_the_button_with_a_confirm_that_says_preemptible() -> None:
    (button,) = buttons(cluster(WAITING), "why 7", "alice")
    assert button["action_id"] == "skybot_move_to_overcap:7"
    assert button["value"] == "7"
    assert button["text"]["text"] == "Move to overcap"
    confirm = button["confirm"]["text"]["text"]
    assert confirm == (
        "Job `7` `train` moves to partition `overcap`, account `overcap` (as you), keeping its "
        "job id. There it is *preemptible*: when a lab needs those GPUs, Slurm stops it and "
        "requeues it. Save checkpoints."
    )
    # Slack refuses a confirm text over 300 characters: a long job name is cut.
    long = pending(name="x" * 500)
    (button,) = buttons(cluster(long), "why 7", "alice")
    assert len(button["confirm"]["text"]["text"]) <= 300


def test_why_shows_no_button_to_others_in_a_channel_or_when_nothing_fits() -> None:
    assert buttons(cluster(WAITING), "why 7", "bob") == []
    assert buttons(cluster(WAITING), "why 7", None) == []
    assert buttons(cluster(WAITING), "why 7 --here", "alice") == []
    big = pending(gpus_by_type={"a40": 4})
    assert buttons(cluster(big), "why 7", "alice") == []


# ----------------------------------------------------------------------------- the click


class Runner:
    def __init__(self, reply: dict[str, Any] | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.reply = reply

    async def __call__(self, user: str, request: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((user, request))
        # As the runner answers: move-to-overcap says where the job went, cancel only which.
        where = {k: request[k] for k in ("partition", "account") if k in request}
        return self.reply or {"ok": True, "job_id": request["job_id"], **where}


async def click(
    writer: StoreWriter, runner: Runner, slack_user: str, label: str, view: ClusterView
) -> str:
    links = {"T1/UALICE": "alice", "T1/UBOB": "bob"}
    identity = IdentityDirectory(IdentityConfig(links=links), writer)
    services = Services(load_config(None), identity, runner, writer=writer)
    return await move_clicked(view, services, "T1", slack_user, label)


async def test_the_clickers_own_account_acts_and_nobody_elses(writer: StoreWriter) -> None:
    runner, view = Runner(), cluster(WAITING)
    assert await click(writer, runner, "UBOB", "7", view) == (
        "Job `7` belongs to `alice`, not to you (`bob`): skybot acts only as you, "
        "so nothing was done."
    )
    assert await click(writer, runner, "UNOBODY", "7", view) == (
        "skybot acts only as your own cluster account: link it first with `/sky link USER`."
    )
    assert runner.calls == []
    assert await click(writer, runner, "UALICE", "7", view) == (
        "Moved job `7` `train` to partition `overcap`, account `overcap` (as `alice`), with the "
        "same job id: it starts on idle GPUs there, and is requeued when a lab needs them."
    )
    assert runner.calls == [
        (
            "alice",
            {"action": "move-to-overcap", "job_id": "7", "partition": "overcap",
             "account": "overcap"},
        )
    ]  # fmt: skip


async def test_stale_and_forged_buttons_do_nothing(writer: StoreWriter) -> None:
    runner = Runner()
    gone = "is no longer pending (it started, ended or was cancelled): nothing was moved."
    started = pending(state="RUNNING", reason="")
    assert await click(writer, runner, "UALICE", "7", cluster(started)) == f"Job `7` {gone}"
    assert await click(writer, runner, "UALICE", "404", cluster(WAITING)) == f"Job `404` {gone}"
    for forged in ("7;rm -rf", "7_1", "", "<!channel>"):
        assert await click(writer, runner, "UALICE", forged, cluster(WAITING)) == (
            "That button does not name a job skybot can move."
        )
    assert runner.calls == []


async def test_slurms_refusal_is_shown_escaped(writer: StoreWriter) -> None:
    runner = Runner({"ok": False, "error": "Job is no longer pending <!channel>"})
    assert await click(writer, runner, "UALICE", "7", cluster(WAITING)) == (
        "Slurm did not move job `7`: `Job is no longer pending &lt;!channel&gt;`"
    )


def test_a_site_whose_overcap_needs_no_account_is_told_only_the_partition() -> None:
    view = make_view(make_snapshot())
    assert overcap_flags(view) == "`--partition=overcap --account=overcap`"
    assert overcap_flags(replace(view, overcap_account="")) == "`--partition=overcap`"
