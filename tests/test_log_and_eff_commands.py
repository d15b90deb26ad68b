"""`/sky log` (a job's output, read as its owner, privately) and `/sky eff` (its efficiency)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from bot.config import IdentityConfig, load_config
from core.records import JobUsage
from handlers.commands import command_table
from handlers.identity import IdentityDirectory
from handlers.services import Services
from store.writer import StoreWriter
from tests.support.asking import answer_with_services
from tests.support.factories import job, make_snapshot, make_view

USAGE = JobUsage(
    3600,
    cpus=8,
    cpu_seconds=3600.0,
    mem_requested_bytes=64 * 2**30,
    mem_peak_bytes=3 * 2**30,
    time_limit_minutes=600,
)
LINES = "".join(f"line {i} <!channel>\n" for i in range(1, 41)).encode()
JOBS = (
    job(7, user="alice", name="train", std_out="/home/alice/train-7.out", work_dir="/home/alice"),
    job(8, user="bob", name="bobs", std_out="/home/bob/b.out", work_dir="/home/bob"),
    job(
        9,
        user="alice",
        state="COMPLETED",
        usage=JobUsage(
            3600,
            cpus=8,
            cpu_seconds=3600.0,
            mem_requested_bytes=64 * 2**30,
            mem_peak_bytes=3 * 2**30,
            time_limit_minutes=600,
        ),
    ),
)


class Runner:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, user: str, request: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((user, request))
        data = LINES[-int(request["max_bytes"]) :]
        return {
            "ok": True,
            "data": base64.b64encode(data).decode(),
            "start": len(LINES) - len(data),
            "size": len(LINES),
        }


@pytest.fixture
def runner() -> Runner:
    return Runner()


@pytest.fixture
def services(writer: StoreWriter, runner: Runner) -> Services:
    identity = IdentityDirectory(IdentityConfig(links={"T1/U1": "alice", "T1/U2": "bob"}), writer)
    view = make_view(make_snapshot(jobs=JOBS))
    return Services(load_config(None), identity, runner, writer=writer, view=lambda: view)


async def sky(services: Services, text: str, user: str = "alice") -> tuple[str, Any]:
    reply = await answer_with_services(
        command_table(), services.view(), services, text,  # type: ignore[misc]
        team_id="T1", user_id="U1" if user == "alice" else "U2", cluster_user=user,
    )  # fmt: skip
    return reply.text, reply


async def test_log_reads_the_last_lines_as_the_owner_with_a_show_more_button(
    services: Services, runner: Runner
) -> None:
    text, reply = await sky(services, "log 7 --lines 5")
    assert runner.calls == [
        ("alice", {"action": "tail", "path": "/home/alice/train-7.out", "max_lines": 5,
                   "max_bytes": runner.calls[0][1]["max_bytes"]}),
    ]  # fmt: skip
    assert text.startswith("Job 7 `train` (`running`), read as `alice`:")
    assert "line 36 &lt;!channel&gt;" in text and "line 40 &lt;!channel&gt;" in text
    assert "line 35 " not in text
    assert not reply.in_channel
    (actions,) = [b for b in reply.blocks if b["type"] == "actions"]
    assert actions["elements"][0]["action_id"] == "skybot_log_more:7:out"


async def test_someone_elses_job_and_here_are_refused_before_the_runner(
    services: Services, runner: Runner
) -> None:
    text, _ = await sky(services, "log 7", user="bob")
    assert text == (
        "Job 7 belongs to `alice`, not to you (`bob`): skybot shows a job's output only to "
        "its owner, so nothing was read."
    )
    text, reply = await sky(services, "log 7 --here")
    assert "never posted for all" in text and not reply.in_channel
    for bad, words in [
        ("log", "Which job?"),
        ("log 7 --lines 500", "from 1 to 200"),
        ("log 7 --lines ²", "from 1 to 200"),
        ("log 12345", "does not know job 12345"),
    ]:
        assert words in (await sky(services, bad))[0], bad
    assert runner.calls == []


async def test_eff_shows_the_end_dm_figures_for_the_owner_only(services: Services) -> None:
    text, _ = await sky(services, "eff 9")
    assert text.startswith("Job 9 `job9` (`completed`):")
    assert "CPU efficiency: 12 % of 8 CPUs" in text
    assert "`--mem=4G` would start sooner" in text
    assert (
        "is `running`: its efficiency is known once it has ended"
        in (await sky(services, "eff 7"))[0]
    )
    assert "belongs to `alice`" in (await sky(services, "eff 9", user="bob"))[0]
