"""The read-only `/sky` commands, end to end through dispatch(), against a hand-built snapshot."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.cluster_config import LabConfig
from core.records import LabCap
from core.snapshot import ClusterSnapshot, SourceStatus
from core.view import ClusterView
from handlers.commands import command_table
from handlers.reply import MAX_BLOCKS
from tests.support.asking import ask, block_text, one_liner
from tests.support.factories import (
    LABS,
    filesystem_usage,
    job,
    make_snapshot,
    make_view,
    node,
)
from tests.support.sample_cluster import NOW, TAKEN_AT, cluster, cluster_jobs

# ----------------------------------------------------------------- table


def test_command_table_lists_the_commands_in_order() -> None:
    names = [c.name for c in command_table().all()]
    assert names == [
        "help",
        "gpus",
        "jobs",
        "free",
        "disk",
        "df",
        "images",
        "why",
        "template",
        "watch",
        "unwatch",
        "submit",
        "cancel",
        "log",
        "eff",
        "notify",
        "digest",
        "link",
        "whoami",
        "unlink",
    ]
    text = ask("help").text
    for name in names:
        assert f"`/sky {name}" in text


def test_here_makes_the_answer_public_and_default_is_ephemeral() -> None:
    assert ask("gpus hoffman-lab --here").in_channel
    assert not ask("gpus hoffman-lab").in_channel


# ----------------------------------------------------------------- gpus


def test_gpus_shows_cap_users_types_overcap_waiting_and_idle() -> None:
    reply = ask("gpus hoffman-lab")
    text = reply.text
    assert "*`hoffman-lab`*: 4/4 GPUs in use (at cap)" in text
    assert "by user: `alice` 2, `bob` 2" in text
    assert "by GPU type: `a40` 2, `rtx_6000` 2" in text
    assert "overcap (preemptible): 3 GPUs — `alice` 3" in text
    assert "1 job waiting at the cap" in text and "`103` `bob` `a40:2` (`AssocGrpGRES`)" in text
    assert "Idle GPUs cluster-wide: `a40` 3, `rtx_6000` 2" in text  # baymax is drained
    assert "as of 12 s ago" in text
    assert reply.blocks[-1]["type"] == "context"
    assert "as of 12 s ago" in block_text(reply)
    assert "4/4 GPUs" in block_text(reply)


def test_gpus_lab_names_are_case_insensitive() -> None:
    assert "4/4 GPUs in use" in ask("gpus HOFFMAN-Lab").text


def test_gpus_headroom_and_no_cap() -> None:
    assert "0/8 GPUs in use (8 free under the cap)" in ask("gpus kira-lab").text
    view = cluster(caps=(LabCap("hoffman-lab", None),))
    assert "4 GPUs in use (no GPU cap)" in ask("gpus hoffman-lab", view).text


def test_gpus_before_caps_were_ever_read_says_so() -> None:
    view = cluster(caps=())
    status = dict(view.snapshot.status)
    status["caps"] = SourceStatus("caps")
    view = make_view(replace(view.snapshot, status=status))
    text = ask("gpus hoffman-lab", view).text
    assert "4 GPUs in use (cap not known yet)" in text
    assert "has not read the lab GPU caps yet" in text


def test_gpus_without_lab_uses_the_askers_labs() -> None:
    assert "*`hoffman-lab`*: 4/4" in ask("gpus", cluster_user="alice").text
    text = ask("gpus", cluster_user="carol").text
    assert "*`kira-lab`*: 0/8" in text and "hoffman-lab" not in text


def test_gpus_without_lab_for_an_unknown_asker_lists_the_labs() -> None:
    for user in (None, "zed"):
        line = one_liner(ask("gpus", cluster_user=user))
        assert "name one" in line and "`hoffman-lab`, `kira-lab`" in line


def test_gpus_near_miss_suggests_the_lab() -> None:
    line = one_liner(ask("gpus hofman-lab"))
    assert line == "I don't know a lab called `hofman-lab`. Did you mean `hoffman-lab`?"


def test_gpus_unknown_lab_lists_the_labs() -> None:
    line = one_liner(ask("gpus physics"))
    assert "`physics`" in line and "Labs: `hoffman-lab`, `kira-lab`." in line


def test_gpus_too_many_arguments() -> None:
    assert "Too many arguments" in one_liner(ask("gpus hoffman-lab kira-lab"))


def test_gpus_many_waiting_jobs_are_cut_short() -> None:
    waiting = [
        job(i, user=f"u{i}", state="PENDING", reason="AssocGrpGRES", gpus_by_type={"a40": 1})
        for i in range(1000, 1500)
    ]
    reply = ask("gpus hoffman-lab", cluster([*cluster_jobs(), *waiting]))
    assert "501 jobs waiting at the cap" in reply.text
    assert "… and 493 more" in reply.text


# ----------------------------------------------------------------- jobs


def test_jobs_lists_own_running_first_with_elapsed_and_reasons() -> None:
    text = ask("jobs").text
    lines = text.splitlines()
    assert lines[0] == "*`alice`*: 2 running (5 GPUs), 0 pending"
    assert lines[1] == "`101` `job101` · `hoffman-lab` · `a40:2` · running 3 h 12 min"
    assert lines[2] == "`104` `job104` · `overcap` · `a40:3` · running 1 min"
    assert "107" not in text  # finished jobs are not listed


def test_jobs_of_another_user_shows_pending_reason_after_running() -> None:
    text = ask("jobs bob").text
    assert text.index("`102`") < text.index("`103`")
    assert (
        "`103` `sweep` · `hoffman-lab` · `a40:2` · pending: lab at its GPU cap (`AssocGrpGRES`)"
    ) in text


def test_jobs_array_tasks_show_their_task_id() -> None:
    view = cluster([job(5, user="alice", array_job_id=4, array_task="1", start_time=NOW - 30)])
    assert "`4_1` `job5`" in ask("jobs", view).text


def test_jobs_without_any() -> None:
    assert "You (`dave`) have no running or pending jobs." in ask("jobs", cluster_user="dave").text
    assert "`dave` has no running or pending jobs." in ask("jobs dave").text


def test_jobs_unknown_user_suggests_a_near_name() -> None:
    assert "Did you mean `alice`?" in ask("jobs alcie").text


def test_jobs_given_a_lab_points_to_gpus() -> None:
    assert "try `/sky gpus hoffman-lab`" in ask("jobs hoffman-lab").text


def test_jobs_needs_a_user_when_the_asker_is_unknown() -> None:
    answer = one_liner(ask("jobs", cluster_user=None))
    assert "link it with `/sky link YOUR_CLUSTER_USER`" in answer
    assert "name one: `/sky jobs [USER]`" in answer


def test_jobs_rejects_a_name_that_cannot_be_a_user() -> None:
    assert "is not a cluster user name" in one_liner(ask("jobs '<!here>'"))


def test_jobs_500_jobs_stay_within_slack_limits() -> None:
    many = [
        job(i, user="alice", name="n" * 200, state="PENDING" if i % 2 else "RUNNING",
            reason="Priority", gpus_by_type={"a40": 1, "rtx_6000": 1}, start_time=NOW - i)
        for i in range(10_000, 10_500)
    ]  # fmt: skip
    reply = ask("jobs", cluster(many))
    assert "*`alice`*: 250 running (500 GPUs), 250 pending" in reply.text
    assert "… and 475 more" in reply.text
    assert len(reply.blocks) <= MAX_BLOCKS
    # Running jobs first even when cut short.
    assert "pending" not in reply.text.splitlines()[1]


# ----------------------------------------------------------------- free


def test_free_lists_idle_gpus_by_type_node_and_partitions() -> None:
    text = ask("free").text
    assert "*`a40`*: 3 idle" in text
    assert "`clippy`: 3 — partitions: `hoffman-lab, kira-lab, debug, overcap`" in text
    assert "*`rtx_6000`*: 2 idle" in text
    assert "2080_ti" not in text  # drained
    assert "--partition=overcap --account=overcap" in text


def test_free_one_type_any_case() -> None:
    text = ask("free A40").text
    assert "*`a40`*: 3 idle" in text and "rtx_6000" not in text


def test_free_known_type_with_nothing_idle() -> None:
    text = ask("free 2080_ti").text
    assert "No idle `2080_ti` GPUs right now (4 in the cluster, 4 on nodes that are down" in text


def test_free_unknown_type_lists_known_types() -> None:
    line = one_liner(ask("free h100"))
    assert "`h100`" in line and "Known types: `2080_ti`, `a40`, `rtx_6000`." in line
    assert "Did you mean `a40`?" in one_liner(ask("free a4"))


def test_free_nothing_idle_anywhere() -> None:
    view = cluster(nodes=(node("clippy", "a40", total=4, used=4),))
    assert "No idle GPUs anywhere in the cluster right now." in ask("free", view).text


# ----------------------------------------------------------------- disk and df


def test_disk_defaults_to_the_askers_directories() -> None:
    text = ask("disk").text
    assert "*`alice`*: 1.2T in 1 directory" in text
    assert "`/srv/hoffman-lab/flash9/alice` `1.2T` · updated 2024-05-06" in text
    assert "as of 12 s ago" in text


def test_disk_for_a_lab_lists_largest_first_with_the_filesystem() -> None:
    text = ask("disk Hoffman-Lab").text
    assert "*`hoffman-lab`*: 2.2T in 3 directories on `/srv/hoffman-lab/flash9`" in text
    assert "93% full — 4.0T free of 55.0T" in text
    assert text.index("/alice`") < text.index("/dave`") < text.index("/bob`")
    assert "(`dave`)" in text and "carol" not in text


def test_disk_for_another_user() -> None:
    assert "*`carol`*: 4.8G in 1 directory" in ask("disk carol").text


def test_disk_unknown_name_suggests() -> None:
    line = one_liner(ask("disk carl"))
    assert "no disk-usage reports for a lab or user called `carl`" in line
    assert "Did you mean `carol`?" in line


def test_disk_asker_without_reports_and_unknown_asker() -> None:
    assert "no disk-usage reports for your directories" in ask("disk", cluster_user="eve").text
    assert "/sky link YOUR_CLUSTER_USER" in one_liner(ask("disk", cluster_user=None))


def test_disk_lab_without_storage_roots() -> None:
    labs = (*LABS, LabConfig("ha-lab", "ha-lab", "ha-lab"))
    view = make_view(cluster().snapshot, labs)
    assert "no storage roots configured for *`ha-lab`*" in ask("disk ha-lab", view).text


def test_df_is_worst_first_with_a_warning_marker() -> None:
    lines = ask("df").text.splitlines()
    assert lines[0] == "⚠️ `/srv/hoffman-lab/flash9` 93% full — 4.0T free of 55.0T (`hoffman-lab`)"
    assert lines[1] == "`/srv/kira-lab/share4` 10% full — 174T free of 194T (`kira-lab`)"


def test_df_marks_exactly_90_percent() -> None:
    view = cluster(
        filesystems=(filesystem_usage("/srv/x", 100, 90), filesystem_usage("/y", 100, 89))
    )
    lines = ask("df", view).text.splitlines()
    assert lines[0].startswith("⚠️ `/srv/x` 90% full") and lines[1].startswith("`/y` 89%")


def test_df_takes_no_arguments_and_handles_no_filesystems() -> None:
    assert "takes no arguments" in one_liner(ask("df hoffman-lab"))
    assert "No storage filesystems reported" in ask("df", cluster(filesystems=())).text


# ----------------------------------------------------------------- why


def test_why_at_the_cap_names_who_uses_the_gpus_and_suggests_overcap() -> None:
    text = ask("why 103").text
    assert "Job `103` (`sweep`, `bob`) is pending in `hoffman-lab`" in text
    assert "`hoffman-lab` is using 4/4 GPUs: `alice` 2, `bob` 2." in text
    assert "It needs 2, so it waits until the lab's jobs free 2 more." in text
    assert "Idle `a40` on overcap would fit it right now: `clippy` (`a40` 3)" in text
    assert "`--partition=overcap --account=overcap`" in text


def test_why_at_the_cap_with_room_freed_since() -> None:
    jobs = [j for j in cluster_jobs() if j.job_id != 102]  # bob's 2 GPUs freed
    assert "There is room for it now" in ask("why 103", cluster(jobs)).text


def test_why_no_overcap_suggestion_when_nothing_idle_fits() -> None:
    big = job(110, state="PENDING", reason="AssocGrpGRES", gpus_by_type={"a40": 4})
    text = ask("why 110", cluster([*cluster_jobs(), big])).text
    assert "overcap would fit" not in text


def test_why_resources_shows_headroom_and_slurms_start_estimate() -> None:
    text = ask("why 106").text
    assert "waiting for resources" in text
    assert "`kira-lab`: 0/8 GPUs in use (8 free under the cap)." in text
    assert "Slurm's estimate: it starts at " in text
    assert "UTC, in about 2 h 5 min (when running jobs reach their time limits" in text


@pytest.mark.parametrize(
    ("reason", "restarts", "expected"),
    [
        ("Priority", 0, "higher priority are queued ahead of it"),
        ("BeginTime", 3, "It has been requeued 3 times.\nSlurm holds a requeued job briefly"),
        ("BeginTime", 0, "begin time (`--begin`)"),
        ("Dependency", 0, "waits for the jobs it depends on"),
        ("DependencyNeverSatisfied", 0, "will never start. Cancel it with `scancel 120`"),
        ("ReqNodeNotAvail, UnavailableNodes:clippy", 0, "Slurm adds: `UnavailableNodes:clippy`"),
        ("JobHeldUser", 0, "`scontrol release 120`"),
        ("JobHeldAdmin", 0, "An admin put it on hold"),
        ("QOSMaxGRESPerUser", 0, "as many GPUs as the job's QOS allows one user"),
        ("PartitionTimeLimit", 0, "longer than `hoffman-lab` allows"),
        ("AssocGrpCpuLimit", 0, "group limit (`AssocGrpCpuLimit`)"),
        ("Priority", 2, "It has been requeued 2 times"),
        ("FancyNewReason", 0, "Slurm gives the reason `FancyNewReason`; skybot has no explanation"),
    ],
)
def test_why_explains_reason_codes(reason: str, restarts: int, expected: str) -> None:
    pending = job(120, state="PENDING", reason=reason, restarts=restarts, gpus_by_type={"a40": 1})
    text = ask("why 120", cluster([*cluster_jobs(), pending])).text
    assert expected in text
    assert "hoffman-lab" in text


def test_why_pending_overcap_job_explains_overcap() -> None:
    pending = job(121, account="overcap", partition="overcap", state="PENDING", reason="Resources",
                  gpus_by_type={"a40": 1})  # fmt: skip
    text = ask("why 121", cluster([*cluster_jobs(), pending])).text
    assert "It is an overcap job" in text and "Resubmit" not in text


def test_why_running_job() -> None:
    text = ask("why 101").text
    assert "Job `101` (`job101`, `alice`) has been running for 3 h 12 min on `clippy`" in text
    assert "It has 1 d 20 h left of its 2 d time limit." in text
    assert "can be preempted" in ask("why 104").text


def test_why_finished_job() -> None:
    text = ask("why 107").text
    assert "has ended: it failed 5 min ago, at " in text
    assert "UTC (`FAILED`, exit code 1)." in text
    assert "`/srv/hoffman-lab/flash9/alice/out.log`" in text


def test_why_array_tasks() -> None:
    jobs = [
        job(300, state="RUNNING", array_job_id=300, array_task="1", start_time=NOW - 5),
        job(301, state="PENDING", reason="Priority", array_job_id=300, array_task="[2-9:2%1]"),
    ]
    view = cluster(jobs)
    assert "Job `300_1`" in ask("why 300_1", view).text
    assert "Job `300_[2-9:2%1]`" in ask("why 300_4", view).text
    assert "I don't see job `300_5`" in ask("why 300_5", view).text
    summary = ask("why 299", cluster([replace(j, array_job_id=299) for j in jobs])).text
    assert "Job 299 is a job array (1 pending, 1 running)" in summary


def test_why_unknown_job() -> None:
    assert ask("why 999").text.startswith(
        "I don't see job `999`: skybot has no record of it among Slurm's current jobs. "
        "Check the id with `/sky jobs`."
    )


@pytest.mark.parametrize("word", ["abc", "12a", "-5", "1_2_3", "١٢٣", "9" * 40])
def test_why_rejects_what_is_not_a_job_id(word: str) -> None:
    assert "is not a job id" in one_liner(ask(f"why {word}"))


def test_why_needs_exactly_one_job_id() -> None:
    assert "Give one job id" in one_liner(ask("why"))
    assert "Give one job id" in one_liner(ask("why 1 2"))
    assert "Job `103`" in ask("why #103").text


# ----------------------------------------------------------------- freshness and safety


def test_failing_slurm_is_flagged_with_the_age_of_the_data() -> None:
    view = cluster()
    status = dict(view.snapshot.status)
    status["slurm"] = SourceStatus("slurm", TAKEN_AT, "squeue timed out\nafter 20 s", TAKEN_AT + 60)
    view = make_view(replace(view.snapshot, status=status))
    reply = ask("gpus hoffman-lab", view, now=TAKEN_AT + 180)
    first = reply.text.splitlines()[0]
    assert first == (
        "⚠️ The Slurm controller (slurmctld) has not answered for 2 min (since 13:47 UTC): "
        "jobs and GPUs are shown as of 3 min ago."
    )
    assert block_text(reply).startswith("⚠️ The Slurm controller (slurmctld) has not answered")
    assert "timed out" not in reply.text, "Slurm's own words are for the admins' log"


def test_failing_accounting_is_named_while_the_live_view_stays_unflagged() -> None:
    view = cluster()
    status = dict(view.snapshot.status)
    status["accounting"] = SourceStatus(
        "accounting", TAKEN_AT - 90, "sacct: Unspecified error", TAKEN_AT - 90
    )
    view = make_view(replace(view.snapshot, status=status))
    text = ask("jobs", view, now=TAKEN_AT + 30).text
    assert text.splitlines()[0] == (
        "⚠️ Slurm accounting (slurmdbd) has not answered for 2 min (since 13:45 UTC): "
        "finished jobs may be reported late."
    )
    assert "controller" not in text
    assert "Unspecified error" not in text


def test_stale_data_without_an_error_is_flagged() -> None:
    text = ask("jobs", now=TAKEN_AT + 600).text
    assert "Slurm data is from 10 min ago" in text


def test_no_data_yet_says_so() -> None:
    empty = make_view(make_snapshot(None))
    for command in ("gpus hoffman-lab", "jobs", "free", "why 1"):
        assert "skybot has not heard from Slurm yet — try again in a few seconds." in one_liner(
            ask(command, empty)
        )
    for command in ("disk", "df"):
        assert "skybot has not scanned storage yet" in one_liner(ask(command, empty))


def test_no_data_and_a_failing_source_shows_the_error() -> None:
    view = make_view(make_snapshot(None, errors={"slurm": "slurmctld down"}))
    assert "Last attempt failed: `slurmctld down`" in ask("jobs", view).text


def test_bare_view_without_status_still_answers() -> None:
    view = ClusterView(ClusterSnapshot(), LABS)
    assert "has not heard from Slurm" in ask("gpus", view).text


def test_cluster_text_cannot_ping_the_channel() -> None:
    sneaky = job(130, name="<!channel> `x` & <@U123>", state="PENDING", reason="Priority")
    reply = ask("why 130 --here", cluster([sneaky]))
    for text in (reply.text, block_text(reply)):
        assert "<!channel>" not in text and "<@U123>" not in text
        assert "`&lt;!channel&gt; \u02cbx\u02cb &amp; &lt;@U123&gt;`" in text


def test_huge_argument_is_clipped_in_the_answer() -> None:
    line = one_liner(ask("gpus " + "x" * 10_000))
    assert len(line) < 200
