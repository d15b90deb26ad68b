"""A Move click on nova's job where skynet has a job of the same id, and Show more on nova, on
the two real test clusters (issue 38): the click moves nova's job, as its owner, through the
real runner, and skynet's job of that id stays where it was.

The names go the other way round from tests/test_several_clusters_cluster.py: here skynet,
the default, is 24.11 read through its slurmrestd socket, and nova is this host's 22.05 read
through its commands, where skybot acts through the runner (runner.toml's [clusters.nova]).
Why: a Move must act, so nova's commands and the runner must reach its Slurm, and the host's
runner cannot reach 24.11 (the sandbox has a network namespace of its own); and nova must not
be the default, or a button that forgot its cluster would land on the right one by chance.

The two jobs get the same id by using up ids on whichever cluster is behind (held het
jobs, cancelled at once). Queued behind other runs on both clusters with:
flock -o /tmp/skybot-cluster.lock flock -o /tmp/skybot-cluster-24.11.lock python3 -m pytest …
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.config_schema import Config, parse_config
from tests.support.bot_process import SLACK_IDS, TEAM, ask, linked_users, running_bot
from tests.support.cluster import sbatch_async, squeue_json, wait_for
from tests.support.nova import SOCKET, TOKEN, nova, nova_queue, nova_sbatch
from tests.support.private_jobs import private_dir
from tests.support.slack_clicks import buttons, click, dm_buttons
from tests.support.slack_standin import SlackStandIn
from tests.support.stored_polls import stored_poll

__all__ = ["nova_queue", "private_dir"]  # fixtures, used by name

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.both_clusters,
    pytest.mark.skipif(
        "SKYBOT_TESTCLUSTER" in os.environ, reason="drives both clusters from the host"
    ),
]

RUNNER_TOML = Path("/etc/skybot/runner.toml")
# Where the runner finds nova's Slurm: this host's 22.05.
NOVA_TABLE = '\n[clusters.nova]\nslurm_conf = "/etc/slurm/slurm.conf"\n'
# Held jobs submitted (then cancelled) to bring the cluster that is behind to the other's id.
MOST_IDS_USED_UP = 200_000
HOFFMAN = ("-p", "hoffman-lab", "-A", "hoffman-lab")
KIRA = ("-p", "kira-lab", "-A", "kira-lab")


@pytest.fixture
def runner_knows_nova() -> Iterator[None]:
    """runner.toml with a table for nova (this host's 22.05), as an admin of such a site adds
    it; the file as it was afterwards."""
    before = RUNNER_TOML.read_text() if RUNNER_TOML.exists() else None
    RUNNER_TOML.write_text((before or "") + NOVA_TABLE)
    RUNNER_TOML.chmod(0o644)
    try:
        yield
    finally:
        if before is None:
            RUNNER_TOML.unlink()
        else:
            RUNNER_TOML.write_text(before)


def clusters(tmp_path: Path) -> Config:
    def lab(name: str) -> dict[str, str]:
        return {"name": name, "partition": name, "account": name}

    return parse_config(
        {
            "slack": {"mode": "socket"},
            "database": {"path": str(tmp_path / "skybot.db")},
            "identity": {"links": {f"{TEAM}/{sid}": user for user, sid in SLACK_IDS.items()}},
            "clusters": [
                {
                    "name": "skynet",
                    "source": "slurmrestd",
                    "url": SOCKET,
                    "token_file": TOKEN,
                    "slurm": {"poll_seconds": 2},
                    "labs": [lab("kira-lab")],
                },
                {"name": "nova", "slurm": {"poll_seconds": 2}, "labs": [lab("hoffman-lab")]},
            ],
        }
    )


def host_job(job_id: int) -> dict[str, Any] | None:
    for job in squeue_json()["jobs"]:
        if job["job_id"] == job_id:
            return {"state": job["job_state"], "partition": job["partition"]}
    return None


def sandbox_job(job_id: int) -> str:
    """`USER PARTITION STATE` of 24.11's job, or "" once it left the queue."""
    return nova("squeue", "--noheader", "--jobs", str(job_id), "--format=%u %P %T").strip()


# A held het job of 128 components (Slurm's most) takes 128 ids in one sbatch, so a gap
# of tens of thousands (CI's 24.11 cluster ran 33,831 more jobs than its host) closes in
# seconds; the rest go one held job at a time.
HET_COMPONENTS = 128


def use_up_script(count: int, user: str) -> str:
    one = "-p kira-lab -A kira-lab -o /dev/null -n1"
    het = " : ".join([one] * HET_COMPONENTS)
    sbatch = f"sbatch --uid={user} --hold -J used-up"
    return (
        f"for i in $(seq {count // HET_COMPONENTS}); do "
        f"{sbatch} {het} --wrap true >/dev/null || exit 1; done; "
        f"for i in $(seq {count % HET_COMPONENTS}); do "
        f"{sbatch} {one} --wrap true >/dev/null || exit 1; done"
    )


def use_up_on_host(count: int) -> None:
    subprocess.run(["sh", "-c", use_up_script(count, "carol")], check=True, timeout=600)
    subprocess.run(["scancel", "--name=used-up"], check=True, timeout=60)


def use_up_on_sandbox(count: int) -> None:
    nova("sh", "-c", use_up_script(count, "dave"), timeout=600)
    nova("scancel", "--name=used-up")


async def same_ids(waiting: int, held: int) -> tuple[int, int]:
    """alice's job pending at her cap on nova (this host) and dave's held job on skynet
    (24.11) resubmitted on whichever cluster is behind until their ids agree."""
    for _ in range(3):
        if waiting == held:
            return waiting, held
        gap = abs(waiting - held) - 1
        assert gap < MOST_IDS_USED_UP, f"the clusters' job ids are {gap} apart"
        if waiting < held:
            await asyncio.to_thread(use_up_on_host, gap)
            subprocess.run(["scancel", str(waiting)], check=True, timeout=60)
            waiting = await cap_bound_job()
        else:
            await asyncio.to_thread(use_up_on_sandbox, gap)
            nova("scancel", str(held))
            held = nova_sbatch("dave", *KIRA, "--hold", "-J", "same-id", "--wrap", "true")
    raise AssertionError(f"no common job id: nova's {waiting}, skynet's {held}")


async def cap_bound_job() -> int:
    """alice's job that waits at hoffman-lab's GPU cap while idle a40s would take it."""
    return await sbatch_async(
        "alice", *HOFFMAN, "-J", "train", "--chdir=/tmp", "-o", "/dev/null",
        "--gpus-per-node=a40:2", "--wrap", "sleep 600",
    )  # fmt: skip


async def move_buttons(slack: SlackStandIn, job_id: int) -> list[dict[str, Any]]:
    answer = await ask(slack, "alice", f"why {job_id} --cluster nova")
    return [b for b in buttons(answer) if "move_to_overcap" in b["action_id"]]


@pytest.mark.timeout(900)
async def test_a_move_on_novas_job_leaves_skynets_job_of_the_same_id(
    tmp_path: Path,
    clean_queue: None,
    checkout_runner: None,
    nova_queue: None,
    runner_knows_nova: None,
    private_dir: Path,
) -> None:
    config = clusters(tmp_path)
    # hoffman-lab's 4 GPUs taken on nova, so alice's next GPU job waits at the cap.
    await sbatch_async("alice", *HOFFMAN, "--chdir=/tmp", "-o", "/dev/null",
                       "--gpus-per-node=rtx_6000:4", "--wrap", "sleep 600")  # fmt: skip
    waiting = await cap_bound_job()
    held = nova_sbatch("dave", *KIRA, "--hold", "-J", "same-id", "--wrap", "true")
    waiting, held = await same_ids(waiting, held)
    job_id = waiting
    await wait_for(
        lambda: (host_job(job_id) or {}).get("state") == "PENDING", 30, "nova's job to wait"
    )
    async with SlackStandIn(users=linked_users()) as slack, running_bot(config, slack):
        await slack.wait_for_socket_connection(timeout=20)
        database = Path(config.database.path)
        await stored_poll(database, "nova", 0.0)
        await stored_poll(database, "skynet", 0.0)

        # skynet's job of that id is dave's, held: asked without --cluster, it is skynet's.
        theirs = json.dumps(await ask(slack, "dave", f"why {job_id}"))
        assert "On cluster `skynet`" in theirs and "hold" in theirs.lower(), theirs

        # Offered once a poll of nova has seen the job wait at the cap beside idle a40s.
        (move,) = await wait_for(
            lambda: move_buttons(slack, job_id),
            60,
            "nova's /sky why offering Move",
            in_thread=False,
        )
        assert move["value"] == f"nova/{job_id}", move
        answer = await click(slack, "alice", move)
        assert answer.startswith(f"Moved job `{job_id}` `train` to partition `overcap`"), answer
        await wait_for(
            lambda: (host_job(job_id) or {}).get("partition") == "overcap", 30, "the move"
        )
        # skynet's job of the same id: still dave's, held, in kira-lab.
        assert sandbox_job(job_id) == "dave kira-lab PENDING", sandbox_job(job_id)

        # Show more on nova: its failure DM names nova, and a click reads the lines before.
        noisy = await sbatch_async(
            "alice", *HOFFMAN, "-J", "noisy", f"--chdir={private_dir}",
            "-o", f"{private_dir}/%x-%j.out",
            "--wrap", "for i in $(seq 1 40); do echo line $i; done; exit 3",
        )  # fmt: skip
        await wait_for(lambda: dm_buttons(slack, noisy) or None, 90, "nova's failure DM")
        (more,) = dm_buttons(slack, noisy)
        assert more["value"].startswith(f"nova/{noisy}:out:"), more
        earlier = await click(slack, "alice", more, in_dm=True)
        assert earlier.startswith(f"Earlier output of job {noisy} `noisy`"), earlier
