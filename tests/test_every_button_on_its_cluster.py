"""Every command and every button answers about, and acts on, the cluster it was asked about.

Generated from the command table and the button registry, so a new command or button is
covered without editing this file: on a bot of two clusters that share job ids and node names
(tests/support/two_cluster_bot.py), each command is asked with `--cluster NAME` (and, where its
usage takes a lab, through that cluster's lab), and every button its answer or a DM (a job's start,
a job's failure) offers is clicked. Whatever is answered names nothing of the other cluster;
every button that can name a cluster names this one; the runner is only ever asked about this
cluster; and the store's per-cluster rows of the other cluster are untouched. Both clusters are
asked in turn on one bot, so what is kept between asks (kept answers, the one-at-a-time job
action lock, remembered cancels) is crossed too.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.cluster_config import CLUSTER_NAME
from core.records import Job
from handlers.buttons.registry import BUTTONS
from handlers.home import home_view
from handlers.router import Command
from store.alerts import save_starts_wanted
from store.clusters import CLUSTER_TABLES
from tests.support.factories import job
from tests.support.two_cluster_bot import (
    ALICE,
    CLUSTERS,
    GPU,
    LAB,
    TABLE,
    TEAM,
    TwoClusterBot,
    alices_jobs,
    buttons,
    cluster_named,
    other,
    runner_name,
    two_cluster_bot,
)

# What each placeholder of a command's usage is filled in with, on `cluster`. A command whose
# usage has a placeholder not listed here fails below, saying which to add.
EXAMPLES = {
    "JOBID": lambda cluster: "7",
    # More than any one node has idle: the watch is kept (and listed with a Remove button).
    "TYPE:N": lambda cluster: f"{GPU[cluster]}:6",
    "PATH": lambda cluster: "/home/alice/job.sh",
    "USER": lambda cluster: "alice",
    "ID|all": lambda cluster: "all",
}
_OPTIONAL = re.compile(r"\[[^\]]*\]")


def asks(command: Command, cluster: str) -> list[str]:
    """`command` as its usage says, on `cluster`: with `--cluster`, then by its name alone
    with `--cluster`, and (if its usage takes a lab) through the cluster's lab alone."""
    usage = command.usage.split(" | ")[0]
    words = _OPTIONAL.sub("", usage).split()
    for i, word in enumerate(words[1:], 1):
        if word.isupper() or "|" in word or ":" in word:
            assert word in EXAMPLES, f"add an example for {word!r} ({command.usage!r})"
            words[i] = EXAMPLES[word](cluster)
    texts = [" ".join([*words, "--cluster", cluster]), f"{words[0]} --cluster {cluster}"]
    lab = next((g for g in _OPTIONAL.findall(usage) if "LAB" in g), None)
    if lab is not None:
        chosen = lab.strip("[]").replace("LAB|USER", "LAB").replace("LAB", LAB[cluster])
        texts.append(" ".join([*words, chosen]))
    return list(dict.fromkeys(texts))


def takes_a_cluster(element: dict[str, Any]) -> bool:
    """Whether the button's kind can name a cluster (a watch's number is one across them)."""
    kind = next(b.kind for b in BUTTONS if b.kind.pattern.fullmatch(element["action_id"]))
    return CLUSTER_NAME.pattern in kind.suffix


def others_marks(cluster: str) -> list[str]:
    """What only the other cluster's answers say: its jobs' names and paths, its GPU type,
    its name as an answer names a cluster."""
    name = other(cluster)
    return [f"{name}-", GPU[name], f"`{name}`"]


async def rows_by_cluster(bot: TwoClusterBot) -> dict[str, dict[str, int]]:
    def count(db: Any) -> dict[str, dict[str, int]]:
        return {
            table: dict(db.execute(f"SELECT cluster, COUNT(*) FROM {table} GROUP BY cluster"))
            for table in CLUSTER_TABLES
        }

    return await bot.writer.run(count)


class OnOneCluster:
    """Checks that what follows stays on `cluster`: its answers, buttons, runner and rows."""

    def __init__(self, bot: TwoClusterBot, cluster: str) -> None:
        self.bot, self.cluster = bot, cluster
        self.calls = len(bot.runner_calls())
        self.rows: dict[str, dict[str, int]] = {}

    async def __aenter__(self) -> OnOneCluster:
        self.rows = await rows_by_cluster(self.bot)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if exc[0] is not None:
            return
        for call in self.bot.runner_calls()[self.calls :]:
            assert call["request"].get("cluster") == runner_name(self.cluster), call
        after = await rows_by_cluster(self.bot)
        theirs = other(self.cluster)
        for table, counts in after.items():
            assert counts.get(theirs) == self.rows[table].get(theirs), (table, self.cluster)

    def check(self, what: str, text: str, blocks: list[dict[str, Any]]) -> None:
        for mark in others_marks(self.cluster):
            assert mark not in text, (what, mark, text)
        for element in buttons(blocks):
            assert mark not in element["value"] and mark not in element["action_id"]
            if takes_a_cluster(element):
                assert cluster_named(element) == self.cluster, (what, element)

    async def click_all(self, what: str, blocks: list[dict[str, Any]]) -> set[str]:
        """Click every button in `blocks`; the names of the kinds clicked."""
        kinds = set()
        for element in buttons(blocks):
            answer = await self.bot.click(element)
            self.check(f"{what}: {element['action_id']}", answer.notice, answer.blocks)
            assert "does not name" not in answer.notice, (what, element, answer.notice)
            kinds.add(
                next(b.kind.name for b in BUTTONS if b.kind.pattern.fullmatch(element["action_id"]))
            )
        return kinds


@pytest.mark.parametrize("first", CLUSTERS)
async def test_every_command_and_its_buttons_stay_on_the_cluster_asked(
    tmp_path: Path, first: str
) -> None:
    clicked: dict[str, set[str]] = {cluster: set() for cluster in CLUSTERS}
    async with two_cluster_bot(tmp_path) as bot:
        for cluster in (first, other(first)):
            for command in TABLE.all():
                for text in asks(command, cluster):
                    async with OnOneCluster(bot, cluster) as on_it:
                        reply = await bot.ask(text)
                        on_it.check(text, reply.text, reply.blocks)
                        if command.about_cluster and not command.private:
                            assert "On cluster" not in reply.text or (
                                f"On cluster `{cluster}`." in reply.text
                            ), text
                        clicked[cluster] |= await on_it.click_all(text, reply.blocks)
    # Every registered button was offered by some command, and clicked, on both clusters: a
    # new button no command offers fails here (make a command offer it on this bot).
    every = {b.kind.name for b in BUTTONS}
    assert clicked == {cluster: every for cluster in CLUSTERS}, clicked


# What each kind of DM's outbox key starts with, on `cluster`: every DM a job's news makes.
DM_KINDS = {
    "start": lambda cluster: f"jobstart:{cluster}:",
    "array start": lambda cluster: f"arraystart:{cluster}:20:",
    "end": lambda cluster: f"job:{cluster}:10:",
    "failure": lambda cluster: f"job:{cluster}:8:",
    "array end": lambda cluster: f"array:{cluster}:20:end",
    "summary": lambda cluster: f"jobs:{cluster}:",
}


@pytest.mark.parametrize("first", CLUSTERS)
async def test_every_button_a_dm_offers_stays_on_the_dms_cluster(
    tmp_path: Path, first: str
) -> None:
    """Every kind of DM (a job's start, end and failure, an array's start and end, a summary
    of many ends) on both clusters, each of their buttons clicked, whatever the buttons are:
    a button a DM offers later is clicked here without editing this test."""
    async with two_cluster_bot(tmp_path) as bot:
        await bot.writer.run(save_starts_wanted, TEAM, ALICE, True, 0.0)
        for cluster in CLUSTERS:
            for poll in dm_worthy_polls(cluster, time.time()):
                await bot.poll(cluster, *poll)
                await bot.wing(cluster).watchers.after_slurm_poll()
        dms = await bot.writer.run(lambda db: list(db.query("SELECT * FROM outbox ORDER BY id")))
        offered: dict[str, dict[str, set[str]]] = {cluster: {} for cluster in CLUSTERS}
        for cluster in (first, other(first)):
            for row in (row for row in dms if f":{cluster}:" in row["key"]):
                kind = next(
                    (k for k, key in DM_KINDS.items() if row["key"].startswith(key(cluster))), None
                )
                assert kind is not None, f"a DM of no known kind: {row['key']}"
                blocks = _blocks(row)
                async with OnOneCluster(bot, cluster) as on_it:
                    on_it.check(row["key"], row["text"], blocks)
                    clicked = await on_it.click_all(row["key"], blocks)
                offered[cluster].setdefault(kind, set()).update(clicked)
    # Every kind of DM was made on both clusters, each offering the same buttons on both.
    assert set(offered[first]) == set(DM_KINDS), offered
    assert offered[first] == offered[other(first)], offered
    # Not vacuous: those that show a job's output offer more of it, so buttons were clicked.
    with_buttons = {kind for kind, kinds in offered[first].items() if kinds}
    assert with_buttons >= {"start", "array start", "failure", "array end", "summary"}, offered


def dm_kind(key: str, cluster: str) -> str:
    kind = next((k for k, start in DM_KINDS.items() if key.startswith(start(cluster))), None)
    assert kind is not None, f"a DM of no known kind: {key}"
    return kind


def dm_worthy_polls(cluster: str, now: float) -> list[tuple[list[Job], list[Job], float]]:
    """On `cluster` (the same ids on both): job 10 and array 20's tasks start; then job 7
    starts, job 8 fails, job 10 completes, and array 20 ends with a task failed; then six jobs
    (30 to 35, started with 10) fail at once, told in one summary."""
    seven, eight, nine = alices_jobs(cluster, now)
    out = {"std_out": f"/home/alice/{cluster}-%j.out", "work_dir": "/home/alice"}
    ten = job(10, name=f"{cluster}-ten", state="RUNNING", nodes="gpu02", **out,
              start_time=int(now) - 60, partition=LAB[cluster], account=LAB[cluster])  # fmt: skip
    tasks = [
        replace(ten, job_id=20 + task, name=f"{cluster}-array", array_job_id=20,
                array_task=str(task))
        for task in (1, 2, 3)
    ]  # fmt: skip
    started = replace(seven, state="RUNNING", reason="None", start_time=int(now) - 5,
                      nodes="gpu02")  # fmt: skip
    ended = {"end_time": int(now) - 2}
    failed = replace(eight, state="FAILED", exit_code=1, **ended)
    done = replace(ten, state="COMPLETED", exit_code=0, **ended)
    tasks_ended = [
        replace(task, state="FAILED" if task.job_id == 23 else "COMPLETED",
                exit_code=1 if task.job_id == 23 else 0, **ended)
        for task in tasks
    ]  # fmt: skip
    many = [replace(ten, job_id=30 + i, name=f"{cluster}-many") for i in range(6)]
    many_failed = [replace(j, state="FAILED", exit_code=1, **ended) for j in many]
    return [
        ([seven, eight, nine, ten, *tasks, *many], [], now - 0.5),
        ([started, nine, *many], [failed, done, *tasks_ended], now),
        ([started, nine], many_failed, now + 0.5),
    ]


def _blocks(row: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = row.get("blocks")
    return json.loads(blocks) if isinstance(blocks, str) and blocks else []


async def test_every_button_the_home_tab_offers_acts_on_its_own_cluster(tmp_path: Path) -> None:
    async with two_cluster_bot(tmp_path) as bot:
        desks = bot.desks.all()
        home = await home_view(
            desks[0].view(), bot.shared, TABLE, TEAM, ALICE, time.time(), None,
            [(desk.name, desk.view()) for desk in desks],
        )  # fmt: skip
        offered: dict[str, set[str]] = {cluster: set() for cluster in CLUSTERS}
        for element in buttons(home["blocks"]):
            cluster = cluster_named(element) if takes_a_cluster(element) else None
            if cluster is None:
                continue  # a watch's Remove: no watches on this bot yet
            async with OnOneCluster(bot, cluster) as on_it:
                on_it.check("Home tab", "", [{"type": "actions", "elements": [element]}])
                offered[cluster] |= await on_it.click_all("Home tab", [
                    {"type": "actions", "elements": [element]}
                ])  # fmt: skip
        assert offered == {cluster: {"Cancel"} for cluster in CLUSTERS}, offered
