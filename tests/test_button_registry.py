"""Every button skybot builds has a registered handler, and every registered handler a button.

A button is built only through core/buttons `button(kind, ...)` (no other module writes an
"action_id"), every `ButtonKind` core defines is the kind of one registered button, the
messages that carry buttons (each builder, rendered as skybot sends it) carry only ids a
registered button takes, and a click on each of them, dispatched by a real Bolt app, reaches
that button's handler and not the catch-all for unknown actions.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import pkgutil
from pathlib import Path
from typing import Any

import pytest
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

import core
from bot.config import IdentityConfig, load_config
from core.buttons import ButtonKind
from core.config_schema import Config, NotificationsConfig
from core.gpu_watch import Watch
from core.job_notices import Seen, decide_job_notice
from core.job_output import OutputTail
from core.notice_cluster import NoticeCluster
from core.records import LabCap
from core.start_notices import start_notice
from core.transitions import Transition
from core.view import ClusterView
from handlers.buttons.registry import BUTTONS, register_buttons
from handlers.commands import command_table
from handlers.commands.watch import watch_list
from handlers.home import linked_blocks
from handlers.identity import IdentityDirectory
from handlers.services import Services
from store.writer import StoreWriter
from tests.support.asking import answer_from_view
from tests.support.factories import job, make_snapshot, make_view, node

ROOT = Path(__file__).parent.parent
PRODUCT = ("core", "store", "scheduler", "handlers", "bot")
BUILDER = ROOT / "core" / "buttons" / "__init__.py"
NOW = 1_010.0
WAITING = job(7, name="train", state="PENDING", reason="AssocGrpGRES", gpus_by_type={"a40": 2})
WATCHES = [Watch(n, "T1", "U1", "alice", "a40", 2, False, "lab", "p", "a", 0, 1e10) for n in (7, 8)]


def writes_an_action_id(source: str) -> bool:
    """A dict display with an "action_id" key, or `x["action_id"] = ...`."""
    for node_ in ast.walk(ast.parse(source)):
        if isinstance(node_, ast.Dict) and any(
            isinstance(k, ast.Constant) and k.value == "action_id" for k in node_.keys
        ):
            return True
        if isinstance(node_, ast.Assign | ast.AugAssign):
            targets = node_.targets if isinstance(node_, ast.Assign) else [node_.target]
            for target in targets:
                key = target.slice if isinstance(target, ast.Subscript) else None
                if isinstance(key, ast.Constant) and key.value == "action_id":
                    return True
    return False


def test_only_the_button_builder_writes_an_action_id() -> None:
    writers = [
        path.relative_to(ROOT).as_posix()
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        if "install_files" not in path.parts and writes_an_action_id(path.read_text())
    ]
    assert writers == [BUILDER.relative_to(ROOT).as_posix()]
    assert writes_an_action_id('elements.append({"type": "button", "action_id": "x"})')
    assert writes_an_action_id('element["action_id"] = "x"')
    assert not writes_an_action_id('action.get("action_id", "")')


def kinds_core_defines() -> dict[str, ButtonKind]:
    found = {}
    for info in pkgutil.walk_packages(core.__path__, "core."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, ButtonKind):
                found[f"{value.stem}"] = value
                assert name.isupper(), f"{info.name}.{name}"
    return found


def test_every_kind_of_button_has_exactly_one_registered_handler() -> None:
    registered = [b.kind for b in BUTTONS]
    assert len({k.stem for k in registered}) == len(registered)
    assert sorted(kinds_core_defines().values(), key=lambda k: k.stem) == sorted(
        registered, key=lambda k: k.stem
    )
    # No kind's ids are taken by another's pattern (Bolt would give the click to the first).
    for kind in registered:
        assert [k.stem for k in registered if k.pattern.fullmatch(kind.stem)] == [kind.stem]


# ------------------------------------------------------------- what skybot sends, rendered


def view() -> ClusterView:
    running = [job(1, gpus_by_type={"a40": 2}, nodes="clippy"), job(2, array_job_id=9)]
    return make_view(
        make_snapshot(
            jobs=(*running, job(3, array_job_id=9, array_task="4"), WAITING),
            nodes=(node("clippy", "a40", total=7, used=4),),
            caps=(LabCap("hoffman-lab", 4),),
            members={"hoffman-lab": frozenset({"alice", "bob"})},
        )
    )


def failure_dm() -> list[dict[str, Any]]:
    ended = job(7, state="FAILED", std_err="/home/alice/train-7.err", work_dir="/home/alice")
    notice = decide_job_notice(
        Transition(ended, "RUNNING", "FAILED", 0),
        "all",
        Seen(at=200.0, output=[OutputTail("/home/alice/train-7.err", b"x\n" * 50, 4000, 4100)]),
        Config(notifications=NotificationsConfig(log_tail_lines=5)),
        Config().default_cluster,
    )
    assert notice is not None
    return notice.blocks


def rendered_messages() -> dict[str, list[dict[str, Any]]]:
    """Each message skybot sends with buttons, as it sends it."""
    table = command_table()

    def command(text: str) -> list[dict[str, Any]]:
        reply = answer_from_view(table, view(), text, team_id="T1", user_id="U1",
                                 cluster_user="alice", now=NOW)  # fmt: skip
        return reply.blocks

    started = Transition(
        job(5, std_out="/home/alice/o.out", start_time=900), "PENDING", "RUNNING", 0
    )
    return {
        "/sky jobs": command("jobs"),
        "/sky why 7": command("why 7"),
        "/sky watch": watch_list(WATCHES, NOW).blocks,
        "Home tab": linked_blocks(view(), "alice", "all", True, NOW, watches=WATCHES),
        "start DM": start_notice(started, NoticeCluster("skynet")).blocks,
        "failure DM": failure_dm(),
    }


def buttons_in(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for b in blocks if b.get("type") == "actions" for e in b["elements"]]


def test_every_button_sent_has_a_handler_and_every_handler_a_button_sent() -> None:
    sent: dict[str, set[str]] = {b.kind.stem: set() for b in BUTTONS}
    for message, blocks in rendered_messages().items():
        ids = [element["action_id"] for element in buttons_in(blocks)]
        assert len(set(ids)) == len(ids), message  # unique within a message (Block Kit)
        for action_id in ids:
            takers = [b.kind.stem for b in BUTTONS if b.kind.pattern.fullmatch(action_id)]
            assert len(takers) == 1, f"{message}: no registered button takes {action_id!r}"
            sent[takers[0]].add(message)
    assert {stem: bool(where) for stem, where in sent.items()} == dict.fromkeys(sent, True)


# ------------------------------------------------------------------- clicks through Bolt


class Cache:
    def current(self) -> ClusterView:
        return view()


def block_actions(action_id: str, value: str) -> dict[str, Any]:
    """A click on the Home tab (which has no response_url), as Slack sends it."""
    return {
        "type": "block_actions",
        "team": {"id": "T1"},
        "user": {"id": "UNLINKED", "team_id": "T1"},
        "api_app_id": "A1",
        "trigger_id": "1.2.3",
        "container": {"type": "view", "view_id": "V1"},
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "value": value,
                "block_id": "b",
                "action_ts": "1",
            }
        ],
    }


async def test_a_click_on_each_button_sent_reaches_its_handler(writer: StoreWriter) -> None:
    async def authorize(**_: Any) -> AuthorizeResult:
        return AuthorizeResult(enterprise_id=None, team_id="T1", bot_token="xoxb-test")

    # Nothing is sent to Slack: a Home-tab click is answered through `home` below.
    client = AsyncWebClient(base_url="http://127.0.0.1:9/")
    app = AsyncApp(client=client, authorize=authorize, signing_secret="unused",
                   request_verification_enabled=False, process_before_response=True)  # fmt: skip
    identity = IdentityDirectory(IdentityConfig(), writer)

    async def runner(user: str, request: dict[str, Any], /) -> dict[str, Any]:
        raise AssertionError("an unlinked clicker starts no runner")

    notices: asyncio.Queue[str] = asyncio.Queue()

    async def home(_: AsyncWebClient, team_id: str, user_id: str, notice: str) -> None:
        await notices.put(notice)

    register_buttons(app, Cache(), Services(load_config(None), identity, runner, writer=writer),
                     home)  # fmt: skip
    clicked = [
        (message, e["action_id"], e["value"])
        for message, blocks in rendered_messages().items()
        for e in buttons_in(blocks)
    ]
    for message, action_id, value in clicked:
        response = await app.async_dispatch(
            AsyncBoltRequest(body=block_actions(action_id, value), mode="socket_mode")
        )
        assert response.status == 200, (message, action_id)
        # Each button's own checks answer: the clicker is not linked (watches: not theirs).
        notice = await asyncio.wait_for(notices.get(), 10)
        assert "link" in notice or "watch" in notice, (message, action_id, notice)
    # An id no button takes is acked, and answered by nobody.
    response = await app.async_dispatch(
        AsyncBoltRequest(body=block_actions("skybot_gone:1", "1"), mode="socket_mode")
    )
    assert response.status == 200
    assert notices.empty()


@pytest.mark.parametrize("value", ["7", "9_4", "gpu2/7"])
def test_button_values_can_name_a_cluster(value: str) -> None:
    from core.buttons.cancel import job_button_of

    target = job_button_of(value)
    assert target is not None and target.value == value
    assert (target.cluster is None) is ("/" not in value)
