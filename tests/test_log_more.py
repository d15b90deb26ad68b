""" "Show more of the log": chunk offsets, what a button may carry, and every check on a click.

The chunks are read by the runner's own `tail` code (bot/install_files/skybot_runner.py,
loaded as a module and called in-process, on files the test owns), so the offsets it returns
are the real runner's. Through sudo, as the job's owner, with the real bot and Slack stand-in:
tests/test_log_more_cluster.py.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import pwd
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from msgspec.structs import replace

from bot.config import IdentityConfig, load_config
from core.config_schema import Config, NotificationsConfig
from core.job_notices import Seen, decide_job_notice
from core.job_output import STDERR, STDOUT, OutputTail, tail_bytes, tail_from_reply, tail_parts
from core.log_more import (
    BEGINNING,
    LOG_MORE,
    MAX_OFFSET,
    MoreRequest,
    earlier_chunk,
    parse_more_value,
)
from core.runner_contract import tail_request
from core.transitions import Transition
from handlers.buttons.show_more_log import more_clicked
from handlers.identity import IdentityDirectory
from handlers.services import Services
from store.writer import StoreWriter
from tests.support.factories import job, make_snapshot, make_view
from tests.support.slurm_polls import save_slurm_poll

RUNNER_FILE = Path(__file__).parent.parent / "bot" / "install_files" / "skybot_runner.py"
LINES = 15


@pytest.fixture(scope="module")
def runner_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("skybot_runner_for_chunks", RUNNER_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FileRunner:
    """The runner's `tail`, in-process, on files the test's own user owns; records calls."""

    def __init__(self, runner: ModuleType) -> None:
        self.runner = runner
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, user: str, request: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((user, request))
        me = pwd.getpwuid(os.getuid())
        try:
            return dict(self.runner.do_tail(request, me, {}))
        except self.runner.Refusal as refusal:
            return {"ok": False, "error": str(refusal)}


def read(runner: ModuleType, path: Path, end: int | None = None) -> OutputTail:
    me = pwd.getpwuid(os.getuid())
    reply = runner.do_tail(tail_request(str(path), LINES, tail_bytes(LINES), end), me, {})
    return tail_from_reply(str(path), reply)


def walk_back(runner: ModuleType, path: Path) -> list[str]:
    """Every line shown by the DM's tail and then by each click, oldest first."""
    (part,) = tail_parts([read(runner, path)], LINES)
    chunks = [part.markdown]
    clicks = 0
    while part.begins_at is not None:
        request = MoreRequest(7, STDOUT, part.begins_at, None)
        part = earlier_chunk(request, read(runner, path, part.begins_at), True, LINES)
        chunks.append(part.markdown)
        clicks += 1
        assert clicks < 1000, "the walk back does not end"
    assert chunks[-1].endswith(BEGINNING)
    shown: list[str] = []
    for chunk in reversed(chunks):
        body = chunk.split("```\n", 1)[1].rsplit("\n```", 1)[0] if "```" in chunk else ""
        shown += body.split("\n") if body else []
    return shown


@pytest.mark.parametrize(
    "lines",
    [
        [f"step {i}: loss {i * 0.01:.2f}" for i in range(200)],
        # Long lines (a chunk holds fewer than 15), entities that make escaped text longer,
        # characters of several bytes, and blank lines in between.
        [("<é>" * (i % 200)) + f" line {i}" for i in range(120)],
        [f"line {i}" if i % 3 else "" for i in range(90)],
    ],
    ids=["short", "long-escaped-multibyte", "blank-lines"],
)
def test_walking_back_shows_every_line_once_in_order(
    runner_module: ModuleType, tmp_path: Path, lines: list[str]
) -> None:
    path = tmp_path / "job.err"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    shown = walk_back(runner_module, path)
    expected = [line.replace("<", "&lt;").replace(">", "&gt;") for line in lines]
    assert [s for s in shown if s] == [e for e in expected if e]


def test_a_short_file_offers_no_button_and_the_beginning_says_so(
    runner_module: ModuleType, tmp_path: Path
) -> None:
    path = tmp_path / "short.err"
    path.write_bytes(b"only\ntwo lines\n")
    (part,) = tail_parts([read(runner_module, path)], LINES)
    assert part.begins_at is None  # the whole file is shown: nothing earlier
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(20)))
    (part,) = tail_parts([read(runner_module, path)], LINES)
    assert part.begins_at == len(b"".join(b"line %d\n" % i for i in range(5)))
    earlier = earlier_chunk(
        MoreRequest(7, STDOUT, part.begins_at, None),
        read(runner_module, path, part.begins_at),
        True,
        15,
    )
    assert earlier.markdown == (
        f"*Output* `{path}`, the 5 lines before those above, from byte 0 of 150B:\n"
        "```\nline 0\nline 1\nline 2\nline 3\nline 4\n```\n" + BEGINNING
    )
    assert earlier.begins_at is None


@pytest.mark.parametrize(
    ("action_id", "value"),
    [
        (f"{LOG_MORE}:7:err", "7:err:0"),  # offset 0: the beginning, nothing before it
        (f"{LOG_MORE}:7:err", "7:err:-5"),
        (f"{LOG_MORE}:7:err", "7:err:05"),
        (f"{LOG_MORE}:7:err", "7:err:9223372036854775808"),  # past what the runner takes
        (f"{LOG_MORE}:7:err", "7:err:5\n"),
        (f"{LOG_MORE}:7:err", "7:err:5;cat /etc/shadow"),
        (f"{LOG_MORE}:7:err", "7:err:٣"),  # a digit, but not an ASCII one
        (f"{LOG_MORE}:7:../../etc/shadow", "7:../../etc/shadow:5"),
        (f"{LOG_MORE}:7:path", "7:/home/bob/secret:5"),
        (f"{LOG_MORE}:8:err", "7:err:5"),  # id and value disagree
        (f"{LOG_MORE}:7:out", "7:err:5"),
        (f"{LOG_MORE}:4294967296:err", "4294967296:err:5"),
        ("skybot_cancel_job:7", "7:err:5"),
        (f"{LOG_MORE}:7:err", "x" * 10_000),
    ],
)
def test_only_what_skybot_builds_is_accepted(action_id: str, value: str) -> None:
    assert parse_more_value(action_id, value) is None


def test_what_skybot_builds_comes_back() -> None:
    request = MoreRequest(4294967295, STDERR, 2**63 - 1, None)
    assert parse_more_value(request.action_id, request.value) == request
    assert len(request.value) <= 2000  # Slack's limit on a button's value


# ------------------------------------------------------------------------------ the click


ENDED = job(
    7,
    name="train",
    state="FAILED",
    exit_code=3,
    std_out="%x-%j.out",
    std_err="/logs/%u/%x-%j.err",
    work_dir="/home/alice/run",
)


async def click(
    writer: StoreWriter,
    runner: FileRunner,
    slack_user: str,
    value: str,
    action_id: str | None = None,
    **config_changes: Any,
) -> tuple[str, bool, list[dict[str, Any]]]:
    links = {"T1/UALICE": "alice", "T1/UBOB": "bob"}
    identity = IdentityDirectory(IdentityConfig(links=links), writer)
    config = load_config(None)
    if config_changes:
        config = replace(config, notifications=replace(config.notifications, **config_changes))
    services = Services(config, identity, runner, writer=writer)
    view = make_view(make_snapshot(jobs=[]))  # the job ended long ago: not in the snapshot
    stream = value.split(":")[1] if value.count(":") == 2 else "err"
    answer = await more_clicked(
        view, services, "T1", slack_user, action_id or f"{LOG_MORE}:7:{stream}", value
    )
    return answer.text, answer.refused, answer.blocks


@pytest.fixture
async def recorded(writer: StoreWriter) -> None:
    """Job 7 ran and failed; skybot keeps its record in the transitions."""
    await writer.run(save_slurm_poll, [job(7, name="train", **_paths())], [], [], 100.0)
    await writer.run(save_slurm_poll, [], [ENDED], [], 115.0)


def _paths() -> dict[str, str]:
    return {"std_out": ENDED.std_out, "std_err": ENDED.std_err, "work_dir": ENDED.work_dir}


class RecordingRunner(FileRunner):
    """Answers every `tail` with the same bytes, starting at 40 of a 500-byte file."""

    async def __call__(self, user: str, request: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((user, request))
        data = base64.b64encode(b"\nearlier 1\nearlier 2\n").decode()
        return {"ok": True, "data": data, "start": 40, "size": 500}


async def test_the_owner_reads_the_chunk_slurm_reported_as_herself(
    writer: StoreWriter, recorded: None, runner_module: ModuleType
) -> None:
    runner = RecordingRunner(runner_module)
    text, refused, blocks = await click(writer, runner, "UALICE", "7:err:123")
    assert not refused
    # The path is Slurm's --error for the job, filled in; the button only chose "stderr".
    assert runner.calls == [
        (
            "alice",
            {
                "action": "tail",
                "path": "/logs/alice/train-7.err",
                "max_lines": 15,
                "max_bytes": tail_bytes(15),
                "end": 123,
            },
        )
    ]
    assert text == (
        "Earlier output of job 7 `train`:\n*stderr* `/logs/alice/train-7.err`, the 2 lines "
        "before those above, from byte 41 of 500B:\n```\nearlier 1\nearlier 2\n```"
    )
    (button,) = blocks[-1]["elements"]
    assert (button["action_id"], button["value"]) == (f"{LOG_MORE}:7:err", "7:err:41")
    # stdout is relative to the job's working directory.
    await click(writer, runner, "UALICE", "7:out:9")
    assert runner.calls[-1][1]["path"] == "/home/alice/run/train-7.out"


async def test_show_log_on_a_start_dm_shows_the_last_lines_first(
    writer: StoreWriter, recorded: None, runner_module: ModuleType
) -> None:
    runner = RecordingRunner(runner_module)
    text, refused, blocks = await click(
        writer, runner, "UALICE", f"7:out:{MAX_OFFSET}", f"{LOG_MORE}:7:out"
    )
    assert not refused and runner.calls[-1][1]["end"] == MAX_OFFSET
    assert text.startswith("Latest output of job 7 `train`:\n*stdout* ")
    assert "last 2 lines of 500B" in text
    (button,) = blocks[-1]["elements"]
    assert button["value"] == "7:out:41"


async def test_nobody_else_reads_anything(
    writer: StoreWriter, recorded: None, runner_module: ModuleType
) -> None:
    runner = RecordingRunner(runner_module)
    assert await click(writer, runner, "UBOB", "7:err:123") == (
        "Job 7 belongs to `alice`, not to you (`bob`): skybot shows a job's output only to "
        "its owner, so nothing was read.",
        True,
        [],
    )
    text, refused, _ = await click(writer, runner, "UNOBODY", "7:err:123")
    assert refused and "link it first" in text
    text, refused, _ = await click(writer, runner, "UALICE", "7:err:123; rm -rf ~")
    assert refused and text == "That button does not name a job's output skybot can show."
    text, refused, _ = await click(writer, runner, "UALICE", "7:err:5", f"{LOG_MORE}:8:err")
    assert refused
    text, refused, _ = await click(writer, runner, "UALICE", "7:err:5", log_tail_lines=0)
    assert refused and text == "Showing job output is turned off on this cluster."
    assert runner.calls == []


async def test_a_job_skybot_no_longer_knows_is_said_so(
    writer: StoreWriter, runner_module: ModuleType
) -> None:
    runner = RecordingRunner(runner_module)
    text, refused, _ = await click(writer, runner, "UALICE", "7:err:123")
    assert refused
    assert text == "skybot no longer knows job 7: it keeps ended jobs for 90 days."
    assert runner.calls == []


async def test_what_the_runner_refuses_is_one_line(
    writer: StoreWriter, recorded: None, runner_module: ModuleType
) -> None:
    # The real runner code on a path that does not exist here.
    text, refused, blocks = await click(writer, FileRunner(runner_module), "UALICE", "7:err:9")
    assert not refused  # the owner asked; the answer is the reason
    assert text.endswith(
        "*stderr* `/logs/alice/train-7.err`: not shown: "
        "`The file does not exist (yet, or any more).`"
    )
    assert [b["type"] for b in blocks] == ["section"]  # no button to try again


# --------------------------------------------------------------------------- the failure DM


def failure_dm(tail: OutputTail) -> list[dict[str, Any]]:
    notice = decide_job_notice(
        Transition(ENDED, "RUNNING", "FAILED", 0),
        "all",
        Seen(200.0, output=[tail, OutputTail("/home/alice/run/train-7.out", b"done\n", 0, 5)]),
        Config(notifications=NotificationsConfig(log_tail_lines=LINES)),
        Config().default_cluster,
    )
    assert notice is not None
    return notice.blocks


def test_the_failure_dm_offers_more_only_where_there_is_more() -> None:
    whole = failure_dm(OutputTail("/logs/alice/train-7.err", b"one\ntwo\n", 0, 8))
    assert not [b for b in whole if b["type"] == "actions"]
    cut = failure_dm(OutputTail("/logs/alice/train-7.err", b"\nlast one\n", 9000, 9010))
    (actions,) = [b for b in cut if b["type"] == "actions"]
    assert actions["elements"] == [
        {
            "type": "button",
            "action_id": f"{LOG_MORE}:skynet/7:err",
            "text": {"type": "plain_text", "text": "Show more of stderr"},
            "value": "skynet/7:err:9001",
        }
    ]
