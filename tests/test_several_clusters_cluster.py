"""One `skybot run` serving both real test clusters at once: 22.05 ("skynet", the default)
through its commands on this host, 24.11 ("nova") through its slurmrestd socket. Each command,
DM, watch and click acts on the cluster it names; stopping nova's controller leaves skynet's
answers current.

Queued behind other runs on both clusters with:
flock -o /tmp/skybot-cluster.lock flock -o /tmp/skybot-cluster-24.11.lock python3 -m pytest …
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

from core.config_schema import Config, parse_config
from store.snapshots import load_source_status
from tests.support.bot_process import SLACK_IDS, TEAM, dms_about, linked_users, running_bot
from tests.support.cluster import cluster_script, sbatch_async, squeue_state, wait_for
from tests.support.cluster_locks import LANE_LOCK, holding
from tests.support.slack_standin import SlackStandIn
from tests.test_failure_dms_cluster import private_dir  # noqa: F401 (a fixture)

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.both_clusters,
    pytest.mark.skipif(
        "SKYBOT_TESTCLUSTER" in os.environ, reason="drives both clusters from the host"
    ),
]

REPO = Path(__file__).resolve().parent.parent
SANDBOX = REPO / "deploy" / "testcluster-24.11.sh"
SOCKET = "unix:/run/skybot-slurmrestd/24.11/slurmrestd.sock"
TOKEN = "/etc/skybot/slurm-24.11.jwt"
USERS = tuple(SLACK_IDS)


def nova(*command: str, timeout: float = 120) -> str:
    """`command` inside the 24.11 sandbox, as root."""
    done = subprocess.run(
        [str(SANDBOX), "run", *command], capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
    return done.stdout


def nova_sbatch(user: str, *args: str) -> int:
    out = nova("runuser", "-u", user, "--", "sbatch", "--parsable", "--chdir=/tmp", *args)
    return int(out.strip().split(";")[0])


def nova_state(job_id: int) -> str | None:
    out = nova("squeue", "--noheader", "--jobs", str(job_id), "--format=%T", timeout=60)
    return out.strip() or None


@pytest.fixture
def nova_queue() -> Iterator[None]:
    """24.11's queue empty before and after, and its controller running after; the sandbox
    held under the 24.11 lane's lock meanwhile, so no lane runs in it."""
    with holding(LANE_LOCK, "the Slurm 24.11 test cluster"):
        yield from _emptied_nova_queue()


def _emptied_nova_queue() -> Iterator[None]:
    for user in USERS:
        nova("scancel", f"--user={user}")
    yield
    nova(str(SANDBOX), "up", timeout=300)
    for user in USERS:
        nova("scancel", f"--user={user}")


def two_clusters(tmp_path: Path) -> Config:
    def lab(name: str) -> dict[str, str]:
        return {"name": name, "partition": name, "account": name}

    return parse_config(
        {
            "slack": {"mode": "socket"},
            "database": {"path": str(tmp_path / "skybot.db")},
            "identity": {"links": {f"{TEAM}/{sid}": user for user, sid in SLACK_IDS.items()}},
            "clusters": [
                {"name": "skynet", "slurm": {"poll_seconds": 2}, "labs": [lab("hoffman-lab")]},
                {
                    "name": "nova",
                    "source": "slurmrestd",
                    "url": SOCKET,
                    "token_file": TOKEN,
                    "slurm": {"poll_seconds": 2},
                    "labs": [lab("kira-lab")],
                },
            ],
        }
    )


def source_status(database: Path, cluster: str) -> tuple[float | None, str | None]:
    """When `cluster`'s last Slurm poll was stored, and its error if the last one failed."""
    try:
        connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        try:
            status = load_source_status(sqlite_utils.Database(connection), cluster, "slurm")
            return status.taken_at, status.error
        finally:
            connection.close()
    except sqlite3.OperationalError:
        return None, None


async def stored_poll(database: Path, cluster: str, after: float) -> float:
    def newer() -> float | None:
        taken_at, _ = source_status(database, cluster)
        return taken_at if taken_at is not None and taken_at > after else None

    return await wait_for(newer, 60, f"a {cluster} poll", interval=0.2)


async def ask(slack: SlackStandIn, user: str, text: str) -> dict[str, Any]:
    # The ack's answer, or the one that follows it (an ack within 1 s may say "working on it").
    return await slack.slash_command_answer(
        command="/sky", text=text, user_id=SLACK_IDS[user], team_id=TEAM, timeout=10
    )


def buttons(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for b in answer.get("blocks", []) if b["type"] == "actions" for e in b["elements"]]


async def click(slack: SlackStandIn, user: str, button: dict[str, Any], in_dm: bool = False) -> str:
    """The answer to `user`'s click on `button`: under a private answer, or in their DM."""
    channel = slack.dm_channel_for(SLACK_IDS[user]) if in_dm else None
    payload = slack.block_action_payload(
        user_id=SLACK_IDS[user],
        action_id=button["action_id"],
        value=button["value"],
        channel_id=channel,
    )
    await slack.send_block_action(payload, timeout=3)
    post = await slack.wait_for_response_url_post(url=payload["response_url"], timeout=60)
    return str(post.body["text"])


@pytest.mark.timeout(600)
async def test_one_bot_serves_both_clusters_each_on_its_own(
    tmp_path: Path,
    clean_queue: None,
    checkout_runner: None,
    nova_queue: None,
    private_dir: Path,  # noqa: F811
) -> None:
    config = two_clusters(tmp_path)
    database = tmp_path / "skybot.db"
    # alice's held job on skynet, dave's on nova: the same kind of job, told apart by name.
    on_skynet = await sbatch_async(
        "alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "--hold", "-J", "on-skynet",
        "--wrap", "true",
    )  # fmt: skip
    on_nova = nova_sbatch("dave", "-p", "kira-lab", "-A", "kira-lab", "--hold", "-J", "on-nova",
                          "--wrap", "true")  # fmt: skip
    started = time.time()
    async with SlackStandIn(users=linked_users()) as slack, running_bot(config, slack):
        await slack.wait_for_socket_connection(timeout=20)
        for cluster in ("skynet", "nova"):
            await stored_poll(database, cluster, started)

        # /sky jobs: each cluster's own queue, named; a lab picks its cluster.
        alice_jobs = json.dumps(await ask(slack, "alice", "jobs"))
        assert "on-skynet" in alice_jobs and "On cluster `skynet`" in alice_jobs
        dave_jobs = await ask(slack, "dave", "jobs --cluster nova")
        assert "on-nova" in json.dumps(dave_jobs) and "On cluster `nova`" in dave_jobs["text"]
        assert "on-nova" not in json.dumps(await ask(slack, "dave", "jobs"))
        gpus = await ask(slack, "dave", "gpus kira-lab")
        assert "On cluster `nova`" in gpus["text"], gpus["text"]
        unknown = await ask(slack, "dave", "gpus --cluster orion")
        assert "no cluster called `orion`" in unknown["text"]

        # /sky why: nova's held job is explained from nova's snapshot.
        why = await ask(slack, "dave", f"why {on_nova} --cluster nova")
        assert "On cluster `nova`" in why["text"] and "hold" in why["text"].lower(), why["text"]

        # Cancel: skynet's button cancels as alice; nova's is refused, the job stays.
        (alice_button,) = buttons(await ask(slack, "alice", "jobs"))
        assert alice_button["value"] == f"skynet/{on_skynet}"
        assert "Cancelled job" in await click(slack, "alice", alice_button)
        await wait_for(lambda: squeue_state(on_skynet) in (None, "CANCELLED"), 30, "the cancel")
        # Its end is DM'd, naming skynet (job ids repeat across clusters: the name tells).
        await wait_for(
            lambda: [t for t in dms_about(slack, on_skynet) if "Cluster `skynet`" in t] or None,
            60,
            "skynet's job-end DM",
        )
        # nova, read through slurmrestd, is not acted on: no Cancel is offered there, and a
        # click on one sent before (or forged) is refused.
        assert buttons(dave_jobs) == []
        dave_button = {"action_id": f"skybot_cancel_job:nova/{on_nova}", "value": f"nova/{on_nova}"}
        refused = await click(slack, "dave", dave_button)
        assert "skybot reads nova through slurmrestd and does not act there" in refused
        assert nova_state(on_nova) == "PENDING"

        # Show more on each cluster: skynet's failure DM offers it, naming skynet, and a click
        # reads the lines before (with [[clusters]] every such button was dead); nova's says
        # skybot does not read output there (not the action refusal) and offers nothing.
        noisy = await sbatch_async(
            "alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "-J", "noisy",
            f"--chdir={private_dir}", "-o", f"{private_dir}/%x-%j.out",
            "--wrap", "for i in $(seq 1 40); do echo line $i; done; exit 3",
        )  # fmt: skip
        await wait_for(lambda: dm_buttons(slack, noisy) or None, 90, "skynet's failure DM")
        (more,) = dm_buttons(slack, noisy)
        assert more["value"].startswith(f"skynet/{noisy}:out:"), more
        earlier = await click(slack, "alice", more, in_dm=True)
        assert earlier.startswith(f"Earlier output of job {noisy} `noisy`"), earlier
        failing = nova_sbatch("dave", "-p", "kira-lab", "-A", "kira-lab", "-J", "fails-on-nova",
                              "--wrap", "echo oops; exit 3")  # fmt: skip
        await wait_for(lambda: failure_dms(slack, failing) or None, 90, "nova's failure DM")
        (told,) = failure_dms(slack, failing)
        assert "skybot does not read job output on `nova`" in told, told
        assert "does not act there" not in told

        # A watch on nova: nova's rtx_6000s are taken, skynet's idle; it waits for nova's.
        hog = nova_sbatch("carol", "-p", "kira-lab", "-A", "kira-lab", "-J", "hog",
                          "--gpus-per-node=rtx_6000:4", "--wrap", "sleep 300")  # fmt: skip
        await wait_for(lambda: nova_state(hog) == "RUNNING", 60, "nova's hog to run")
        await stored_poll(database, "nova", time.time())
        made = await ask(slack, "alice", "watch rtx_6000:4 --overcap --cluster nova")
        assert made["text"].startswith("👀 Watch #"), made["text"]

        # A job's end on nova is DM'd, naming nova.
        short = nova_sbatch("dave", "-p", "kira-lab", "-A", "kira-lab", "-J", "short-nova",
                            "--wrap", "sleep 2")  # fmt: skip
        await wait_for(lambda: dms_about(slack, short) or None, 60, "nova's job-end DM")
        assert any("Cluster `nova`" in text for text in dms_about(slack, short))

        nova("scancel", str(hog))
        await wait_for(lambda: _watch_dm(slack) or None, 60, "the watch DM")

        # nova's controller stops: nova's polls fail, skynet's answers stay current.
        nova(str(SANDBOX), "stop-controller")
        await wait_for(lambda: source_status(database, "nova")[1], 90, "nova's polls to fail")
        stopped = time.time()
        await stored_poll(database, "skynet", stopped)
        assert source_status(database, "skynet")[1] is None
        fresh = await ask(slack, "alice", "jobs")
        assert "On cluster `skynet`" in fresh["text"] and "just now" in fresh["text"], fresh

        # And the other way round: nova back, skynet's controller stopped; nova stays current.
        nova(str(SANDBOX), "up", timeout=300)
        await stored_poll(database, "nova", time.time())
        cluster_script("stop-controller")
        try:
            await wait_for(lambda: source_status(database, "skynet")[1], 90, "skynet to fail")
            await stored_poll(database, "nova", time.time())
            assert source_status(database, "nova")[1] is None
            current = await ask(slack, "dave", "jobs --cluster nova")
            assert "on-nova" in json.dumps(current) and "just now" in current["text"], current
        finally:
            cluster_script("up")


def dm_buttons(slack: SlackStandIn, job_id: int) -> list[dict[str, Any]]:
    """The buttons of the failure DM about `job_id`."""
    for call in slack.calls_to("chat.postMessage"):
        if call.ok and f"Job {job_id} " in str(call.params.get("text")):
            if "failed" not in str(call.params.get("text")):
                continue
            blocks = call.params.get("blocks")
            blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
            return [e for b in blocks or [] if b["type"] == "actions" for e in b["elements"]]
    return []


def failure_dms(slack: SlackStandIn, job_id: int) -> list[str]:
    return [text for text in dms_about(slack, job_id) if "failed" in text]


def _watch_dm(slack: SlackStandIn) -> list[str]:
    return [
        str(call.params.get("text"))
        for call in slack.calls_to("chat.postMessage")
        if call.ok and "watch #" in str(call.params.get("text"))
    ]
