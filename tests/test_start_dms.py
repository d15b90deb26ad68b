"""Job start DMs: opt-in per Slack user or per submission, once per run, from transitions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.config import IdentityConfig, load_config
from core.cluster_config import ClusterConfig
from core.config_schema import SubmitConfig
from core.log_more import LOG_MORE, MAX_OFFSET
from core.notice_cluster import NoticeCluster
from core.start_notices import is_start, start_notice
from core.transitions import Transition
from handlers.commands import command_table
from handlers.identity import IdentityDirectory
from handlers.services import Services
from scheduler.watchers.job_dms import process_transitions
from store.alerts import save_starts_wanted
from store.outbox import outbox_rows
from store.submissions import SubmissionRequest, enqueue, finish
from store.writer import StoreWriter
from tests.support.asking import answer_with_services
from tests.support.factories import CLUSTER, job, make_snapshot, make_view
from tests.support.slurm_polls import save_slurm_poll

TEAM = "T1"


class Links:
    def __init__(self, links: dict[str, list[tuple[str, str]]]) -> None:
        self._links = links

    def slack_users_of(self, cluster_user: str) -> list[tuple[str, str]]:
        return self._links.get(cluster_user, [])


def started(**fields: object) -> Transition:
    defaults: dict[str, object] = {
        "name": "train",
        "nodes": "clippy",
        "gpus_by_type": {"a40": 2},
        "start_time": 1_000_000,
        "time_limit_minutes": 90,
        "std_out": "/home/alice/train-123.out",
    }
    defaults.update(fields)
    return Transition(job(123, **defaults), "PENDING", "RUNNING", 0)


def test_the_start_dm_names_node_gpus_limit_output_and_has_a_show_log_button() -> None:
    notice = start_notice(started(), NoticeCluster("skynet"))
    ends = datetime.fromtimestamp(1_000_000 + 90 * 60).strftime("%H:%M")
    assert notice.text.splitlines() == [
        f"▶️ Job 123 `train` started on `clippy` (`a40:2`), time limit ends {ends}.",
        "Partition `hoffman-lab` · Output: `/home/alice/train-123.out`",
    ]
    assert notice.key == "jobstart:skynet:123:0"
    (button,) = notice.blocks[-1]["elements"]
    # It names its cluster, the only one's too (a value naming none is still read).
    assert button["action_id"] == f"{LOG_MORE}:skynet/123:out"
    assert button["value"] == f"skynet/123:out:{MAX_OFFSET}"
    assert button["text"]["text"] == "Show log"


def test_what_counts_as_a_start() -> None:
    assert is_start(started(), 0.0)
    resumed = Transition(started().job, "SUSPENDED", "RUNNING", 0)
    assert not is_start(resumed, 0.0)
    first_seen = Transition(started().job, None, "RUNNING", 0)
    assert is_start(first_seen, 1_000_000 + 30)
    assert not is_start(first_seen, 1_000_000 + 3600)  # skybot's first poll: old news


async def polls(writer: StoreWriter) -> None:
    """Job 1 (alice) and 2 (alice, submitted through skybot) pending, then both running."""
    pending = [job(1, state="PENDING"), job(2, state="PENDING")]
    await writer.run(save_slurm_poll, pending, [], [], 1100.0)
    running = [job(n, start_time=1150, nodes="clippy", gpus_by_type={"a40": 1}) for n in (1, 2)]
    await writer.run(save_slurm_poll, running, [], [], 1200.0)


def wind_back(db: Any) -> None:
    """The cursor back to the start: the same transitions decided again."""
    with db.atomic():
        db.execute("UPDATE notify_cursors SET value = 0")


async def targets(writer: StoreWriter) -> list[str]:
    return [str(row["key"]) for row in await writer.run(outbox_rows)]


async def test_only_those_who_asked_hear_and_only_once(writer: StoreWriter) -> None:
    config = load_config(None)
    links = Links({"alice": [(TEAM, "U1"), (TEAM, "U3")]})
    await polls(writer)
    assert (
        await process_transitions(writer, links, config, ClusterConfig(CLUSTER)) == 0
    )  # nobody asked

    await writer.run(save_starts_wanted, TEAM, "U3", True, 0.0)
    submission = await writer.run(
        lambda db: enqueue(
            db,
            CLUSTER,
            SubmissionRequest(TEAM, "U1", "alice", "/home/alice/job.sh", {}, notify_start=True),
            SubmitConfig(),
            now=0.0,
        )
    )
    await writer.run(finish, submission, 1.0, job_id=2)
    # The same runs again (a fresh cursor): U3 for both jobs, U1 for the one it submitted.
    await writer.run(wind_back)
    assert await process_transitions(writer, links, config, ClusterConfig(CLUSTER)) == 3
    assert sorted(await targets(writer)) == [
        f"jobstart:skynet:1:0:{TEAM}:U3",
        f"jobstart:skynet:2:0:{TEAM}:U1",
        f"jobstart:skynet:2:0:{TEAM}:U3",
    ]
    await writer.run(wind_back)
    assert await process_transitions(writer, links, config, ClusterConfig(CLUSTER)) == 0


class Wakes:
    def __init__(self) -> None:
        self.woken = 0

    def wake(self) -> None:
        self.woken += 1


async def test_submit_notify_start_is_skybots_flag_not_sbatchs(writer: StoreWriter) -> None:
    identity = IdentityDirectory(IdentityConfig(links={"T1/U1": "alice"}), writer)

    async def no_runner(user: str, request: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("submitting is queued; the worker runs sbatch")

    services = Services(load_config(None), identity, no_runner, submissions=Wakes(), writer=writer)
    reply = await answer_with_services(
        command_table(), make_view(make_snapshot()), services,
        "submit job.sh --notify-start --time 10", team_id="T1", user_id="U1",
        cluster_user="alice",
    )  # fmt: skip
    assert reply.text.endswith("in a moment and again when it starts.")
    rows = await writer.run(
        lambda db: db.execute("SELECT options, notify_start FROM submissions").fetchall()
    )
    assert rows == [('{"time": "10"}', 1)]


async def test_a_start_seen_before_the_worker_recorded_the_job_id_is_found_by_its_comment(
    writer: StoreWriter,
) -> None:
    submission = await writer.run(
        lambda db: enqueue(
            db,
            CLUSTER,
            SubmissionRequest(TEAM, "U1", "alice", "/home/alice/job.sh", {}, notify_start=True),
            SubmitConfig(),
            now=0.0,
        )
    )
    comment = f"skybot:{submission.tag}"
    await writer.run(save_slurm_poll, [job(5, state="PENDING", comment=comment)], [], [], 1100.0)
    running = job(5, start_time=1150, nodes="clippy", comment=comment)
    await writer.run(save_slurm_poll, [running], [], [], 1200.0)
    assert (
        await process_transitions(writer, Links({}), load_config(None), ClusterConfig(CLUSTER)) == 1
    )
    assert await targets(writer) == [f"jobstart:skynet:5:0:{TEAM}:U1"]
