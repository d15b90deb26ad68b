"""A bot of two clusters that share job ids and node names, wired as `skybot run` wires it.

Each cluster is a wing of bot/cluster_wing.py (its store-backed snapshot, its runner client,
its submission worker) on one store, with the shared services of bot/service.py. Slurm is
recorded snapshots written through the store (tests/support/slurm_polls.py); the runner is a
stand-in sudo that logs every request it is handed, with the cluster the runner client names, and
answers as the real runner would. Slack is not needed: commands go through the router
(handlers/router.dispatch), clicks through the button registry's own routing
(handlers/buttons/registry.on_cluster and each button's `clicked`).

On both clusters alice has job 7 (`skynet-train` / `nova-train`), pending at her lab's GPU
cap with idle overcap GPUs that would take it, job 8 running, and node `gpu01`, of a40s on
skynet and h100s on nova. What is one cluster's shows in answers about it, and never in those
about the other: that is what tests/test_every_button_on_its_cluster.py checks.
"""

from __future__ import annotations

import json
import stat
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.cluster_wing import ClusterWing, bind_actions, build_wing, runner_call
from bot.metrics import Metrics
from bot.polling import poll_hooks
from core.buttons import split_cluster
from core.config_schema import Config, parse_config
from core.records import Job, LabCap
from handlers.buttons.registry import BUTTONS, answer_click
from handlers.clicks import Answer, Click
from handlers.clusters import ClusterDesks
from handlers.commands import command_table
from handlers.identity import IdentityDirectory
from handlers.reply import Reply
from handlers.request import CommandRequest
from handlers.router import dispatch
from handlers.services import Services
from scheduler.schedule import build_schedule
from store.caps_and_storage import save_caps
from store.writer import StoreWriter
from tests.support.empty_database import empty_database
from tests.support.factories import job, node
from tests.support.slurm_polls import save_slurm_poll

TEAM, ALICE = "T1", "UALICE"
DM_CHANNEL = "D1"
CLUSTERS = ("skynet", "nova")
GPU = {"skynet": "skycard", "nova": "novacard"}
LAB = {"skynet": "hoffman-lab", "nova": "kira-lab"}
TABLE = command_table()

# What the stand-in sudo answers, by the runner action asked (the runner's reply shapes).
_SUDO = """#!/usr/bin/python3
import base64, json, sys, time
request = json.load(sys.stdin)
user = sys.argv[sys.argv.index("-u") + 1]
with open(LOG, "a") as log:
    log.write(json.dumps({"user": user, "request": request}) + "\\n")
action = request.get("action")
job = request.get("job_id", "")
if action == "cancel":
    time.sleep(DELAY)
    reply = {"ok": True, "job_id": job}
elif action == "move-to-overcap":
    reply = {"ok": True, "job_id": job, "partition": request.get("partition", "overcap")}
elif action == "tail":
    data = base64.b64encode(("line of " + request["path"] + "\\n").encode()).decode()
    reply = {"ok": True, "data": data, "start": 10, "size": 100}
elif action == "link":
    reply = {"ok": False, "error": "not in this test"}
else:
    reply = {"ok": False, "error": "not in this test"}
print(json.dumps(reply))
"""


def other(cluster: str) -> str:
    return CLUSTERS[1 - CLUSTERS.index(cluster)]


def runner_name(cluster: str) -> str | None:
    """The cluster the runner client names in its request (the first one's is none)."""
    return None if cluster == CLUSTERS[0] else cluster


def alices_jobs(cluster: str, now: float) -> list[Job]:
    """Job 7 waits at the lab's cap (2 of 4 GPUs used by job 8 and bob's job 9) with idle
    overcap GPUs that fit it; the same ids on both clusters, each named for its cluster."""
    lab, gpu = LAB[cluster], GPU[cluster]
    fields: dict[str, Any] = {"partition": lab, "account": lab, "submit_time": int(now) - 600}
    return [
        job(7, name=f"{cluster}-train", state="PENDING", reason="AssocGrpGRES",
            gpus_by_type={gpu: 2}, std_out=f"/home/alice/{cluster}-%j.out",
            work_dir="/home/alice", **fields),
        job(8, name=f"{cluster}-eval", state="RUNNING", nodes="gpu01", gpus_by_type={gpu: 2},
            start_time=int(now) - 300, std_out=f"/home/alice/{cluster}-%j.out",
            work_dir="/home/alice", **fields),
        job(9, user="bob", name=f"{cluster}-bob", state="RUNNING", nodes="gpu01",
            gpus_by_type={gpu: 2}, start_time=int(now) - 300, **fields),
    ]  # fmt: skip


def config_of(tmp_path: Path, sudo: Path, nova_actions: str) -> Config:
    clusters: list[dict[str, Any]] = [
        {"name": name, "labs": [{"name": LAB[name], "partition": LAB[name], "account": LAB[name]}]}
        for name in CLUSTERS
    ]
    clusters[1].update(
        source="slurmrestd", url="unix:/run/nova.sock", token_file="/etc/skybot/nova.jwt"
    )
    if nova_actions:
        clusters[1]["actions"] = nova_actions
    return parse_config(
        {
            "database": {"path": str(empty_database(tmp_path / "skybot.db"))},
            "runner": {"sudo": str(sudo)},
            "identity": {"links": {f"{TEAM}/{ALICE}": "alice", f"{TEAM}/UBOB": "bob"}},
            "clusters": clusters,
        }
    )


@dataclass
class TwoClusterBot:
    config: Config
    writer: StoreWriter
    wings: list[ClusterWing]
    desks: ClusterDesks
    shared: Services
    log: Path

    def runner_calls(self) -> list[dict[str, Any]]:
        """Every request the runner was handed so far, in order."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    async def poll(self, cluster: str, live: list[Job], ended: list[Job], at: float) -> None:
        """A Slurm poll of `cluster` stored, and its snapshot re-read."""
        gpu = GPU[cluster]
        nodes = [node("gpu01", gpu, total=8, used=4), node("gpu02", gpu, total=4)]
        await self.writer.run(save_slurm_poll, live, ended, nodes, at, True, cluster)
        lab = LAB[cluster]
        await self.writer.run(save_caps, cluster, [LabCap(lab, 4)], {lab: ["alice", "bob"]}, at)
        await self.wing(cluster).cache.refresh()

    def wing(self, cluster: str) -> ClusterWing:
        return next(w for w in self.wings if w.cluster.name == cluster)

    async def ask(self, text: str, user: str = ALICE, cluster_user: str | None = "alice") -> Reply:
        request = CommandRequest(
            team_id=TEAM, user_id=user, text=text, cluster_user=cluster_user,
            now=time.time(), channel_id=DM_CHANNEL,
        )  # fmt: skip
        default = self.desks.default
        return await dispatch(TABLE, request, default.view(), default.services, desks=self.desks)

    async def click(self, element: dict[str, Any], user: str = ALICE) -> Answer:
        """A click on `element` in alice's DM, routed as the button registry routes it."""
        action_id, value = element["action_id"], element["value"]
        button = next(b for b in BUTTONS if b.kind.pattern.fullmatch(action_id))
        click = Click(TEAM, user, action_id, value, True, DM_CHANNEL)
        return await answer_click(button, click, self.desks, self.shared)


def buttons(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for b in blocks if b.get("type") == "actions" for e in b["elements"]]


def cluster_named(element: dict[str, Any]) -> str | None:
    split = split_cluster(element["value"])
    return split[0] if split is not None else None


@asynccontextmanager
async def two_cluster_bot(
    tmp_path: Path, nova_actions: str = "runner", cancel_seconds: float = 0.0
) -> AsyncIterator[TwoClusterBot]:
    """The bot, with both clusters polled once (alice's jobs 7, 8 and bob's 9 on each).
    `nova_actions`: "runner" (skybot acts on nova) or "" (as a slurmrestd cluster is by
    default: it does not)."""
    log = tmp_path / "runner-calls.jsonl"
    sudo = tmp_path / "sudo"
    sudo.write_text(_SUDO.replace("LOG", repr(str(log))).replace("DELAY", repr(cancel_seconds)))
    sudo.chmod(sudo.stat().st_mode | stat.S_IXUSR)
    config = config_of(tmp_path, sudo, nova_actions)
    writer = StoreWriter(config.database.path)
    try:
        identity = IdentityDirectory(config.identity, writer)
        await identity.load()
        wings = [
            await build_wing(config, cluster, writer, identity, lambda: None)
            for cluster in config.clusters
        ]
        schedule = build_schedule(
            [job for wing in wings for job in wing.polls],
            poll_hooks(config, Metrics(), writer, [wing.poller for wing in wings]),
        )
        shared = Services(
            config, identity, runner_call(config, config.default_cluster), writer=writer
        )
        for wing in wings:
            bind_actions(wing, schedule, writer, lambda: None, shared)
        desks = ClusterDesks([wing.desk() for wing in wings])
        bot = TwoClusterBot(config, writer, wings, desks, shared, log)
        now = time.time()
        for cluster in CLUSTERS:
            await bot.poll(cluster, alices_jobs(cluster, now), [], now - 1)
        yield bot
    finally:
        for wing in locals().get("wings", []):
            await wing.poller.close()
        writer.close()
