"""Which job transitions become DMs and what they say (core/job_notices.py)."""

from __future__ import annotations

from typing import Any

import pytest

from core.config_schema import PREFERENCES, Config, NotificationsConfig
from core.job_facts import output_path, run_seconds
from core.job_notices import Seen, decide_job_notice, wants
from core.summary_notices import MAX_SEPARATE_NOTICES, digest_notice
from core.transitions import REQUEUED, Transition
from tests.support.factories import job

# The defaults: overcap is the preemptible partition, keys name the cluster "skynet".
CONFIG = Config()
START = 1_700_000_000
HOUR = 3600


def ended(state: str, **fields: Any) -> Transition:
    values: dict[str, Any] = {
        "name": "train-vit",
        "partition": "hoffman-lab",
        "gpus_by_type": {"a40": 2},
        "start_time": START,
        "end_time": START + 3 * HOUR + 12 * 60,
        "work_dir": "/srv/hoffman-lab/flash9/alice/vit",
        "state": state,
    }
    values.update(fields)
    return Transition(job(1234, **values), "RUNNING", state, values.get("restarts", 0))


def text_of(transition: Transition, pref: str = "all", now: float = START + 5 * HOUR) -> str:
    notice = decide_job_notice(transition, pref, Seen(now), CONFIG, CONFIG.default_cluster)
    assert notice is not None
    return notice.text


def test_completed_names_job_partition_gpus_runtime_and_default_output() -> None:
    assert text_of(ended("COMPLETED")) == (
        "✅ Job 1234 `train-vit` completed successfully.\n"
        "Partition `hoffman-lab` · GPUs `a40:2`\n"
        "Runtime: 3 h 12 min\n"
        "Output: `/srv/hoffman-lab/flash9/alice/vit/slurm-1234.out`"
    )


def test_failed_gives_exit_code_and_signal() -> None:
    text = text_of(ended("FAILED", exit_code=1, exit_signal=9))
    assert text.splitlines()[0] == (
        "❌ Job 1234 `train-vit` failed with exit code 1, signal 9 (SIGKILL)."
    )
    assert text_of(ended("FAILED", exit_code=3)).splitlines()[0] == (
        "❌ Job 1234 `train-vit` failed with exit code 3."
    )


def test_timeout_names_the_limit_and_advises() -> None:
    lines = text_of(ended("TIMEOUT", time_limit_minutes=240)).splitlines()
    assert lines[0] == "⏰ Job 1234 `train-vit` reached its time limit of 4 h and was stopped."
    assert lines[-1] == "Ask for more time with `--time`, or checkpoint and resubmit to continue."


def test_out_of_memory() -> None:
    lines = text_of(ended("OUT_OF_MEMORY")).splitlines()
    assert lines[0] == "💥 Job 1234 `train-vit` ran out of memory and was killed."
    assert lines[-1] == "Ask for more memory with `--mem` or `--mem-per-gpu`."


def test_cancelled_before_and_after_start() -> None:
    assert text_of(ended("CANCELLED")).splitlines()[0] == "🚫 Job 1234 `train-vit` was cancelled."
    never = text_of(ended("CANCELLED", start_time=None, end_time=None)).splitlines()
    assert never[0] == "🚫 Job 1234 `train-vit` was cancelled before it started."
    assert never[2] == "Runtime: it never started"


def test_node_fail() -> None:
    lines = text_of(ended("NODE_FAIL")).splitlines()
    assert lines[0] == "⚠️ Job 1234 `train-vit` ended because its node failed."
    assert lines[-1] == "This was not your job's fault: resubmit it (or use `--requeue`)."


def test_preempted_on_overcap_says_requeued_restarts_runtime_lost_and_how_to_checkpoint() -> None:
    # The job went back to PENDING for its 2nd restart; its last run started 2 h 30 min
    # before the poll that saw the requeue.
    requeued = job(
        77,
        name="big",
        user="alice",
        account="overcap",
        partition="overcap",
        state="PENDING",
        restarts=2,
        gpus_by_type={"rtx_6000": 4},
        start_time=START,
        std_out="/srv/hoffman-lab/flash9/alice/%x-%j.out",
    )
    transition = Transition(requeued, "RUNNING", REQUEUED, 2)
    notice = decide_job_notice(
        transition, "preempt", Seen(START + 2 * HOUR + 30 * 60), CONFIG, CONFIG.default_cluster
    )
    assert notice is not None
    lines = notice.text.splitlines()
    assert lines[:4] == [
        "🔁 Job 77 `big` was preempted and requeued (restart 2).",
        "Partition `overcap` · GPUs `rtx_6000:4`",
        "Runtime lost: 2 h 30 min, unless the job saved a checkpoint.",
        "Output: `/srv/hoffman-lab/flash9/alice/big-77.out`",
    ]
    assert "catch SIGTERM" in lines[4] and "--signal=B:USR1@120" in lines[4]
    assert "--requeue" in lines[4]
    # The run that was interrupted is run 1 (restart count 2 means the third run is next).
    assert notice.key == "job:skynet:77:1:PREEMPTED"
    assert [b["type"] for b in notice.blocks] == ["section", "context"]


def test_preempted_by_sacct_and_requeue_seen_later_share_one_key() -> None:
    preempted = Transition(
        job(9, partition="overcap", state="PREEMPTED"), "RUNNING", "PREEMPTED", 0
    )
    requeued = Transition(
        job(9, partition="overcap", state="PENDING", restarts=1), "PREEMPTED", REQUEUED, 1
    )
    first = decide_job_notice(preempted, "all", Seen(START), CONFIG, CONFIG.default_cluster)
    second = decide_job_notice(requeued, "all", Seen(START), CONFIG, CONFIG.default_cluster)
    assert first is not None and second is not None
    assert first.key == second.key == "job:skynet:9:0:PREEMPTED"


def test_requeue_off_a_preemptible_partition_is_not_called_a_preemption() -> None:
    transition = Transition(job(5, state="PENDING", restarts=1), "RUNNING", REQUEUED, 1)
    notice = decide_job_notice(transition, "all", Seen(START), CONFIG, CONFIG.default_cluster)
    assert notice is not None and notice.kind == "REQUEUED"
    assert notice.text.splitlines()[0] == (
        "🔁 Job 5 `job5` was requeued (restart 1) and will start again from the beginning."
    )
    assert (
        decide_job_notice(transition, "preempt", Seen(START), CONFIG, CONFIG.default_cluster)
        is None
    )


@pytest.mark.parametrize("to_state", ["PENDING", "RUNNING", "COMPLETING", "SUSPENDED"])
def test_non_final_states_are_not_news(to_state: str) -> None:
    transition = Transition(job(3, state=to_state), "PENDING", to_state, 0)
    for pref in PREFERENCES:
        assert (
            decide_job_notice(transition, pref, Seen(START), CONFIG, CONFIG.default_cluster) is None
        )


def test_preferences_choose_which_kinds_are_sent() -> None:
    kinds = [
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "NODE_FAIL",
        "PREEMPTED",
        "REQUEUED",
    ]
    chosen = {pref: [k for k in kinds if wants(pref, k)] for pref in PREFERENCES}
    assert chosen == {
        "all": kinds,
        "end": [
            "COMPLETED",
            "CANCELLED",
            "FAILED",
            "TIMEOUT",
            "OUT_OF_MEMORY",
            "NODE_FAIL",
            "PREEMPTED",
        ],
        "fail": ["FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "REQUEUED"],
        "preempt": ["PREEMPTED"],
        "off": [],
    }


def test_key_names_cluster_job_run_and_state() -> None:
    notice = decide_job_notice(
        ended("COMPLETED", restarts=3),
        "end",
        Seen(START),
        Config(notifications=NotificationsConfig(cluster_name="sky2")),
        Config(notifications=NotificationsConfig(cluster_name="sky2")).default_cluster,
    )
    assert notice is not None and notice.key == "job:sky2:1234:3:COMPLETED"


def test_hostile_job_names_cannot_ping_anyone() -> None:
    text = text_of(ended("COMPLETED", name="<!channel> `x`"))
    assert "<!channel>" not in text
    assert "`&lt;!channel&gt; \u02cbx\u02cb`" in text


def test_output_path_patterns_and_array_default() -> None:
    task = job(1001, array_job_id=1000, array_task="3", work_dir="/home/alice/", std_out="")
    assert output_path(task) == "/home/alice/slurm-1000_3.out"
    assert output_path(job(5, std_out="/o/%u-%A_%a-%j-%%.log", user="bob")) == (
        "/o/bob-5_4294967294-5-%.log"
    )
    assert output_path(job(6, std_out="", work_dir="")) == "slurm-6.out"


def test_lost_runtime_of_a_requeue_comes_from_when_the_interrupted_run_started() -> None:
    # squeue's record of a requeued job: forecast start of the next run, nonsense end.
    requeued = job(
        8,
        partition="overcap",
        state="PENDING",
        restarts=1,
        start_time=START + 900,
        end_time=6090945408,
    )
    transition = Transition(requeued, "RUNNING", REQUEUED, 1)
    unknown = decide_job_notice(
        transition, "all", Seen(START + 600), CONFIG, CONFIG.default_cluster
    )
    known = decide_job_notice(
        transition, "all", Seen(START + 600, run_started=START), CONFIG, CONFIG.default_cluster
    )
    assert unknown is not None and known is not None
    assert unknown.text.splitlines()[2] == (
        "Runtime lost: an unknown amount, unless the job saved a checkpoint."
    )
    assert known.text.splitlines()[2] == "Runtime lost: 10 min, unless the job saved a checkpoint."


def test_runtime_of_a_requeued_job_uses_now_and_ignores_forecasts() -> None:
    assert run_seconds(job(1, start_time=100, end_time=None), now=400) == 300
    # A forecast end after now is replaced by now; a forecast start means "unknown".
    assert run_seconds(job(1, start_time=100, end_time=9999), now=400) == 300
    assert run_seconds(job(1, start_time=500), now=400) is None


def test_digest_stands_for_many_notices() -> None:
    notices = [
        decide_job_notice(
            Transition(job(2000 + i, state=state, exit_code=i % 7), "RUNNING", state, 0),
            "all",
            Seen(START),
            CONFIG,
            CONFIG.default_cluster,
        )
        for i, state in enumerate(["COMPLETED"] * 22 + ["FAILED"] * 3)
    ]
    assert len(notices) > MAX_SEPARATE_NOTICES
    digest = digest_notice([n for n in notices if n is not None], "jobs:k", "skynet", "skynet")
    lines = digest.text.splitlines()
    assert (
        lines[0] == "📋 25 of your jobs on cluster `skynet` changed state: 22 completed, 3 failed."
    )
    assert lines[1] == "• 2000 `job2000` on `hoffman-lab`: completed"
    assert lines[21] == "… and 5 more"
    assert lines[22:] == [
        "Did not complete:",
        "• failed with exit code 1: job 2022",
        "• failed with exit code 2: job 2023",
        "• failed with exit code 3: job 2024",
        "`/sky log JOBID` shows any of their logs.",
    ]
    buttons = digest.blocks[-1]["elements"]
    assert [b["text"]["text"] for b in buttons] == [f"Show log of {n}" for n in (2022, 2023, 2024)]


def test_lost_runtime_ends_when_slurm_requeued_the_job_not_when_skybot_noticed() -> None:
    # Slurm resets a requeued job's submit time to the moment it requeued it (22.05, 24.11).
    requeued = job(
        8,
        partition="overcap",
        state="PENDING",
        restarts=1,
        submit_time=START + 7,
        start_time=START + 127,  # BeginTime: the forecast start of the next run
        end_time=6090945408,
    )
    transition = Transition(requeued, "RUNNING", REQUEUED, 1)
    notice = decide_job_notice(
        transition, "all", Seen(START + 11, run_started=START), CONFIG, CONFIG.default_cluster
    )
    assert notice is not None
    assert notice.text.splitlines()[2] == "Runtime lost: 7 s, unless the job saved a checkpoint."


def test_a_requeued_job_cancelled_while_waiting_had_started_before() -> None:
    waiting = job(9, state="CANCELLED", partition="overcap", restarts=1, start_time=None)
    notice = decide_job_notice(
        Transition(waiting, "PENDING", "CANCELLED", 1),
        "all",
        Seen(START),
        CONFIG,
        CONFIG.default_cluster,
    )
    assert notice is not None
    lines = notice.text.splitlines()
    assert lines[0].endswith("was cancelled.")
    assert lines[2] == "Runtime: it had not started again since its requeue"


def test_a_job_cancelled_while_pending_has_no_runtime() -> None:
    # Slurm's record of it: start = end = the moment it was cancelled, no nodes.
    lines = text_of(ended("CANCELLED", start_time=1000, end_time=1000, nodes="")).splitlines()
    assert lines[0] == "🚫 Job 1234 `train-vit` was cancelled before it started."
    assert lines[2] == "Runtime: it never started"
    ran = text_of(ended("CANCELLED", start_time=1000, end_time=1000, nodes="clippy"))
    assert "Runtime: 0 s" in ran
