"""`/sky why` and the job-end wording it shares: ids Slurm accepts, requeue causes with Slurm's
own times, plurals, start estimates, and ended jobs answered from skybot's history."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot.config import load_config
from core.config_schema import NotificationsConfig
from core.job_facts import refused_at_submission, slurm_job_id
from core.job_notices import REQUEUED_KIND, Seen, compose_job_notice, notice_kind
from core.notice_cluster import NoticeCluster
from core.notice_text import plural
from core.record_codec import encode_record
from core.records import EarlierRun, Job
from core.slurm_json import parse_sacct
from core.snapshot import SourceStatus
from core.transitions import REQUEUED, Transition, merge_observations
from handlers.commands import command_table
from handlers.commands.why_explain import LastRequeue, explain
from handlers.identity import IdentityDirectory
from handlers.services import Services
from store.writer import StoreWriter
from tests.support.asking import answer_with_services, ask
from tests.support.factories import CLUSTER, job, make_view
from tests.support.sample_cluster import NOW, cluster, cluster_jobs


def test_plural_is_singular_for_one_only() -> None:
    assert [plural(n, "GPU") for n in (0, 1, 2)] == ["0 GPUs", "1 GPU", "2 GPUs"]
    assert plural(1, "time") == "1 time"
    assert plural(3, "entry", "entries") == "3 entries"


def test_one_gpu_reads_as_one_gpu() -> None:
    jobs = [job(101, user="alice", gpus_by_type={"a40": 1}, nodes="clippy", start_time=NOW - 60)]
    text = ask("jobs alice", cluster(jobs)).text
    assert "1 running (1 GPU)" in text and "1 GPUs" not in text


@pytest.mark.parametrize(
    ("array_task", "asked", "expected"),
    [
        ("0-4999%10", None, "316_[0-4999]"),  # the record squeue gives a held array
        ("[0-4999%10]", None, "316_[0-4999]"),
        ("1,3,5,7,9%2", None, "316_[1,3,5,7,9]"),
        ("2-9:2%1", None, "316"),  # scancel refuses a step: the whole array instead
        ("0-4999%10", "7", "316_7"),  # the task the question named
        ("12", None, "316_12"),
        (None, None, "320"),
    ],
)
def test_slurm_job_id_is_a_form_slurm_takes(
    array_task: str | None, asked: str | None, expected: str
) -> None:
    record = job(320, array_job_id=316 if array_task else None, array_task=array_task)
    assert slurm_job_id(record, asked) == expected


def test_held_array_is_told_a_release_slurm_accepts() -> None:
    held = job(316, state="PENDING", reason="JobHeldUser", array_job_id=316,
               array_task="0-4999%10", gpus_by_type={"a40": 1})  # fmt: skip
    view = cluster([*cluster_jobs(), held])
    assert "`scontrol release 316_[0-4999]`" in ask("why 316", view).text
    assert "`scontrol release 316_7`" in ask("why 316_7", view).text


def test_array_summary_suggests_a_task_id_why_takes() -> None:
    tasks = [
        job(400, state="PENDING", reason="Priority", array_job_id=399, array_task="5-9%2"),
        job(401, state="RUNNING", array_job_id=399, array_task="4", start_time=NOW - 5),
    ]
    text = ask("why 399", cluster(tasks)).text
    assert "`/sky why 399_5`" in text or "`/sky why 399_4`" in text
    assert "%" not in text.split("e.g.")[1]


def _requeued(cause: str, partition: str = "overcap") -> Job:
    return job(
        500, state="PENDING", reason="BeginTime", restarts=1, partition=partition,
        account=partition, gpus_by_type={"a40": 1}, submit_time=int(NOW) - 300,
        earlier_run=EarlierRun(cause, int(NOW) - 308, int(NOW) - 300),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("cause", "kind", "words"),
    [
        ("REQUEUED", REQUEUED_KIND, "was requeued with `scontrol requeue`"),
        ("NODE_FAIL", REQUEUED_KIND, "was requeued after its node failed"),
        ("PREEMPTED", "PREEMPTED", "was preempted and requeued"),
    ],
)
def test_requeue_dm_names_its_cause_and_slurms_runtime(cause: str, kind: str, words: str) -> None:
    transition = Transition(_requeued(cause), "RUNNING", REQUEUED, 1)
    assert notice_kind(transition, {"overcap"}) == kind
    # The poll saw the requeue 30 s after Slurm did it; the run lasted 8 s by Slurm's clock.
    notice = compose_job_notice(
        transition,
        kind,
        Seen(NOW - 270, run_started=NOW - 301),
        NotificationsConfig(),
        NoticeCluster("skynet"),
    )
    assert words in notice.text
    assert "Runtime lost: 8 s" in notice.text


def test_requeue_without_sacct_record_falls_back_to_partition() -> None:
    transition = Transition(
        replace(_requeued("REQUEUED"), earlier_run=None), "RUNNING", REQUEUED, 1
    )
    assert notice_kind(transition, {"overcap"}) == "PREEMPTED"


def test_refused_sbatch_record_gets_no_dm() -> None:
    # 22.05 keeps a record of a job sbatch refused: FAILED, never on a node (job 9085).
    refused = job(9085, state="FAILED", exit_code=0, exit_signal=1, nodes="None assigned",
                  submit_time=1000, start_time=1000, end_time=1000)  # fmt: skip
    transition = Transition(refused, None, "FAILED", 0)
    assert refused_at_submission(transition)
    assert notice_kind(transition, {"overcap"}) is None
    # 24.11's record of it: no start (NO_VAL), exit code 1.
    no_start = replace(refused, start_time=None, exit_code=1, exit_signal=0)
    assert notice_kind(Transition(no_start, None, "FAILED", 0), set()) is None
    ran = replace(refused, nodes="clippy", end_time=1005)
    assert notice_kind(Transition(ran, None, "FAILED", 0), {"overcap"}) == "FAILED"
    assert notice_kind(Transition(refused, "PENDING", "FAILED", 0), set()) == "FAILED"


def _sacct_run(state: str, submitted: int, start: int, end: int) -> dict[str, object]:
    return {
        "job_id": 77, "name": "train", "user": "alice", "account": "hoffman-lab",
        "partition": "hoffman-lab", "state": {"current": state, "reason": "None"},
        "time": {"submission": submitted, "start": start, "end": end, "elapsed": end - start},
        "exit_code": {"status": "SUCCESS", "return_code": 0},
    }  # fmt: skip


def test_sacct_duplicates_give_the_stopped_runs_state_and_times() -> None:
    # As 22.05 lists an admin's `scontrol requeue` (seen on the test cluster).
    data = {"jobs": [_sacct_run("REQUEUED", 100, 100, 108), _sacct_run("PENDING", 108, 0, 0)]}
    (record,) = parse_sacct(data).records
    assert record.restarts == 1
    assert record.earlier_run == EarlierRun("REQUEUED", 100, 108)
    live = job(77, state="PENDING", reason="BeginTime", restarts=1)
    merged = merge_observations([live], [record])
    assert merged[77].earlier_run == EarlierRun("REQUEUED", 100, 108)
    assert merged[77].state == "PENDING"


def test_why_says_who_requeued_and_when_by_slurms_clock() -> None:
    recorded = _requeued("REQUEUED", partition="hoffman-lab")
    live = replace(recorded, earlier_run=None)
    lines = explain(cluster([live]), live, NOW, requeue=LastRequeue(recorded, NOW))
    text = "\n".join(lines)
    assert "requeued 1 time; the last run was requeued with `scontrol requeue` (by an" in text
    assert "5 min ago, after running 8 s." in text
    assert "preempted" not in text and "1 times" not in text


def test_start_estimate_or_plainly_none() -> None:
    assert "Slurm's estimate: it starts at " in ask("why 106").text
    no_estimate = job(130, user="carol", account="kira-lab", partition="kira-lab",
                      state="PENDING", reason="Resources", gpus_by_type={"a40": 1})  # fmt: skip
    text = ask("why 130", cluster([*cluster_jobs(), no_estimate])).text
    assert "Slurm does not estimate a start for it." in text
    a_year_out = replace(no_estimate, job_id=131, start_time=int(NOW) + 365 * 24 * 3600 - 60)
    text = ask("why 131", cluster([*cluster_jobs(), a_year_out])).text
    assert "Slurm has no real estimate: a job it waits for has no time limit" in text
    assert "Slurm's estimate" not in text and "364 d" not in text


def test_place_among_jobs_waiting_at_the_lab_cap() -> None:
    waiting = [
        job(140 + i, user="bob", state="PENDING", reason="AssocGrpGRES",
            gpus_by_type={"a40": 2}, submit_time=int(NOW) - 100 + i)
        for i in range(3)
    ]  # fmt: skip
    text = ask("why 141", cluster([*cluster_jobs(), *waiting])).text
    assert "It is number 3 of the 4 jobs waiting at `hoffman-lab`'s cap, by submit time" in text


async def test_ended_job_is_answered_from_history(writer: StoreWriter) -> None:
    gone = job(9399, name="train", state="COMPLETED", exit_code=0, exit_signal=0,
               nodes="clippy", submit_time=int(NOW) - 1300, start_time=int(NOW) - 1200,
               end_time=int(NOW) - 600, work_dir="/tmp")  # fmt: skip
    task = replace(gone, job_id=9410, array_job_id=9400, array_task="3", state="FAILED",
                   exit_code=2)  # fmt: skip

    def record(db: object) -> None:
        for ended in (gone, task):
            db.execute(  # type: ignore[attr-defined]
                "INSERT INTO job_transitions (cluster, job_id, user, from_state, to_state, "
                "restarts, at, record) VALUES (?, ?, ?, 'RUNNING', ?, 0, ?, ?)",
                [CLUSTER, ended.job_id, ended.user, ended.state, NOW - 600, encode_record(ended)],
            )

    await writer.run(record)
    config = load_config(None)
    view = cluster()
    services = Services(
        config, IdentityDirectory(config.identity, writer), _no_runner, writer=writer,
        view=lambda: view,
    )  # fmt: skip

    async def why(text: str) -> str:
        reply = await answer_with_services(
            command_table(), view, services, text, team_id="T1", user_id="U1",
            cluster_user="alice", now=NOW,
        )  # fmt: skip
        return reply.text

    text = await why("why 9399")
    assert "Job `9399` (`train`, `alice`) has ended: it completed 10 min ago, at " in text
    assert "(`COMPLETED`, exit code 0)" in text
    assert "It ran for 10 min on `clippy`." in text
    assert "Its output: `/tmp/slurm-9399.out`" in text
    assert "Slurm itself no longer lists the job" in text
    assert "has ended: it failed" in await why("why 9400_3")
    assert "skybot has no record of it in the last 90 days" in await why("why 9398")


async def _no_runner(user: str, request: dict[str, object]) -> dict[str, object]:
    raise AssertionError("/sky why must not start the runner")


def test_a_failure_seconds_old_says_since_when_not_for_0_s() -> None:
    view = cluster()
    status = dict(view.snapshot.status)
    status["caps"] = SourceStatus("caps", NOW - 400, "sacctmgr: Unspecified error", NOW - 2)
    view = make_view(replace(view.snapshot, status=status))
    text = ask("why 103", view).text
    assert "Slurm accounting (slurmdbd, asked by sacctmgr) has not answered since " in text
    assert "for 0 s" not in text


def test_a_database_outage_is_not_blamed_on_slurmdbd() -> None:
    # What sacct and sacctmgr print with MariaDB stopped (22.05, seen on the test cluster).
    error = "sacct: error: Problem talking to the database: Unable to connect to database"
    view = cluster()
    status = dict(view.snapshot.status)
    status["accounting"] = SourceStatus("accounting", NOW - 100, error, NOW - 95)
    status["caps"] = SourceStatus("caps", NOW - 100, error, NOW - 95)
    view = make_view(replace(view.snapshot, status=status))
    text = ask("why 103", view).text
    assert "The accounting database (behind slurmdbd, asked by sacctmgr) has not answered" in text
    assert "Slurm accounting (slurmdbd" not in text
    jobs = ask("jobs", view).text
    assert "The accounting database (behind slurmdbd) has not answered for 1 min (since " in jobs


def test_a_completing_job_claims_no_start() -> None:
    # A requeue during the epilog: the record's start is the requeue's time.
    completing = job(150, state="COMPLETING", start_time=int(NOW) - 1, nodes="clippy",
                     gpus_by_type={"a40": 1})  # fmt: skip
    text = ask("why 150", cluster([*cluster_jobs(), completing])).text
    assert "is completing (its run is over; Slurm is freeing its node)" in text
    assert "started 1 s ago" not in text
