"""Text skybot did not write can never ping, disguise a link, reorder itself or break markup.

A hostile corpus goes through every builder of what skybot says: every command in the command
table (so a new command is covered the day it is added), every job-notice kind, the job digest,
storage alerts, cap-wait notices, the weekly digest, the submission report, a refused message
handed to whoever asked, chart captions, the Home tab and the console. Each text and block must
hold no Slack control sequence but skybot's own, no bidirectional control, no code span left
open and no formatting outside a code span. `test_every_message_builder_is_covered` fails when
a module starts building messages that this file does not exercise.
"""

from __future__ import annotations

import base64
import re
import shlex
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.config import IdentityConfig, load_config
from bot.console import for_terminal
from core.array_notices import array_end_notice, array_start_notice
from core.cap_waits import cap_wait_notices
from core.chart_specs import LAB_GPUS, ChartSpec
from core.cluster_config import LabConfig
from core.config_schema import NotificationsConfig
from core.digest import LabWeek
from core.gpu_watch import FIRED, Outcome, Spot, Watch, expired_text, fired_text, watch_line
from core.job_form import (
    COMMAND,
    GPU_COUNT,
    GPU_TYPE,
    PLACE,
    TIME,
    WORKDIR,
    ComposedJob,
    check_form,
    form_choices,
)
from core.job_modal import FIELDS, done_view, form_view, review_view, summary
from core.job_notices import PREEMPTED, REQUEUED_KIND, Seen, compose_job_notice
from core.job_output import OutputTail
from core.job_template import TemplateSettings
from core.lab_usage import lab_usage
from core.link_notices import new_link_notice
from core.log_more import LOG_MORE
from core.notice_cluster import NoticeCluster
from core.priority import PendingPriority, PriorityFactors
from core.records import FINAL_STATES, DirectoryUsage, FilesystemUsage
from core.reservations import announcement
from core.slack_text import literal
from core.slurm_limits import PartitionLimits, QosLimits, Reservation, SlurmLimits
from core.snapshot import ClusterSnapshot
from core.start_notices import start_notice
from core.storage_alerts import filesystem_alerts, hoarding_alerts
from core.summary_notices import digest_notice
from core.transitions import REQUEUED, Transition
from core.view import ClusterView
from handlers.buttons.show_more_log import more_clicked
from handlers.charts import ChartRequests, chart_caption
from handlers.commands import command_table
from handlers.commands.watch import free_now, watch_list
from handlers.commands.why_explain import explain
from handlers.home import linked_blocks, unlinked_blocks
from handlers.identity import IdentityDirectory
from handlers.reply import Reply
from handlers.services import Services
from scheduler.digest import digest_messages
from scheduler.outbox_policy import to_whoever_asked
from scheduler.submit_worker import report_text
from store.digests import DigestChannel
from store.outbox import QueuedMessage
from store.submissions import Submission
from store.writer import StoreWriter
from tests.support.asking import answer_from_view, answer_with_services
from tests.support.factories import directory_usage, job, make_snapshot, make_view, node
from tests.support.sample_cluster import NOW, TAKEN_AT
from tests.support.slurm_polls import save_slurm_poll

HOSTILE = [
    "x`<!channel>`y",
    "<http://evil.example/login|Reset your cluster password>",
    "<@U123>",
    "<!here>",
    "&lt;!channel&gt;",
    "<#C123|general> <mailto:a@b.example|mail>",
    "evil\u202egpj.exe",
    "\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u202a\u202b\u202c\u202d",
    "*bold* _it_ ~strike~",
    "```fence``` ` ``",
    "line1\n<!channel>\nline3\r\n\u2028<!everyone>",
    "y" * 5000 + "<!channel>",
]
BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
FORMATTING = ("*bold*", "_it_", "~strike~")
# What skybot itself puts in angle brackets in these messages.
OWN_CONTROLS = {"<@UALICE>", "<#C0LAB>", "<@UASKER>"}


def slack_texts(value: Any) -> Iterator[str]:
    """Every string Slack renders: a message's text and each `text` in its blocks."""
    if isinstance(value, Reply):
        yield value.text
        yield from slack_texts(value.blocks)
    elif isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "text" and isinstance(item, str):
                yield item
            else:
                yield from slack_texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from slack_texts(item)


def assert_inert(text: str) -> None:
    for control in re.findall(r"<[^<>]*>", text):
        assert control in OWN_CONTROLS, f"{control!r} survived in {text[:300]!r}"
    assert not BIDI & set(text), f"a bidi control survived in {text[:300]!r}"
    outside_fences = re.sub(r"```.*?```", "", text, flags=re.S)
    for line in outside_fences.splitlines():
        assert line.count("`") % 2 == 0, f"unbalanced code span in {line[:300]!r}"
    outside_spans = re.sub(r"`[^`\n]*`", "", outside_fences)
    for marker in FORMATTING:
        assert marker not in outside_spans, f"{marker} formats in {text[:300]!r}"


def assert_all_inert(*messages: Any) -> None:
    texts = [t for message in messages for t in slack_texts(message)]
    assert texts
    for text in texts:
        assert_inert(text)


def test_the_checks_catch_what_they_are_for() -> None:
    for bad in (
        "`x`<!channel>`y`",
        "<http://evil.example|x>",
        "<@U123>",
        "a `b",
        "\u202ename",
        "say *bold*",
    ):
        with pytest.raises(AssertionError):
            assert_inert(bad)
    assert_inert("`*bold*` <@UALICE> ```a\n`b```")


@pytest.mark.parametrize("hostile", HOSTILE)
def test_literal_is_inert(hostile: str) -> None:
    shown = literal(hostile)
    assert_inert(shown)
    assert shown.startswith("`") and shown.endswith("`") and shown.count("`") == 2


# ------------------------------------------------------------------ a hostile cluster


def hostile_view(h: str) -> ClusterView:
    labs = (
        LabConfig("hoffman-lab", "hoffman-lab", "hoffman-lab", ("/srv/hoffman-lab/flash9",)),
        # The config refuses a relative storage root: the hostile one is absolute.
        LabConfig(h, h, h, ("/" + h,)),
    )
    jobs = (
        job(101, name=h, partition=h, reason=h, nodes=h, std_out=h, gpus_by_type={h: 2},
            start_time=int(NOW - 60)),
        job(102, name=h, state="PENDING", reason="Priority", partition=h, account=h,
            gpus_by_type={h: 1}),
        job(103, name=h, state="PENDING", reason=h, array_job_id=103, array_task=h),
        job(104, user="bob", name=h, state="PENDING", reason="AssocGrpGRES",
            gpus_by_type={"a40": 9}),
    )  # fmt: skip
    snapshot = make_snapshot(
        TAKEN_AT,
        errors={"caps": h},
        jobs=jobs,
        nodes=(node(h, h, total=4, partitions=(h,)), node("clippy", "a40", total=8)),
        members={"hoffman-lab": frozenset({"alice", "bob"}), h: frozenset({"alice"})},
        directories=(
            directory_usage("alice", 1_300_000_000, path=h, human=h),
            directory_usage(h, 900_000_000, root=h, path=f"{h}/x"),
        ),
        filesystems=(FilesystemUsage(h, 100, 99, 1),),
    )
    return make_view(snapshot, labs)


class Queue:
    def wake(self) -> None:
        pass


def hostile_services(writer: StoreWriter, view: ClusterView, h: str) -> Services:
    async def runner(user: str, request: dict[str, Any]) -> dict[str, Any]:
        return {"ok": False, "error": h}

    identity = IdentityDirectory(IdentityConfig(links={"T1/UALICE": "alice"}), writer)
    return Services(
        load_config(None),
        identity,
        runner,
        submissions=Queue(),
        writer=writer,
        queue_charts=ChartRequests(writer, lambda: None),
        view=lambda: view,
    )


def command_texts(name: str, h: str) -> list[str]:
    """Ways a command can meet hostile text: in its data, as its argument, after real ones."""
    q = shlex.quote(h)
    return [
        name,
        f"{name} {q}",
        f"{name} {q} --here",
        f"{name} hoffman-lab {q}",
        f"{name} {q} --partition {q}",
        f"{name} 101 --chart",
        f"{name} --lab {q}",
        f"{name} --lab {q} --interactive",
        f"{name} --lab {q} --gpus {q} --image {q}",
    ]


TABLE = command_table()


@pytest.mark.parametrize("name", [c.name for c in TABLE.all()])
@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
async def test_every_command_keeps_hostile_text_inert(
    writer: StoreWriter, name: str, hostile: str
) -> None:
    view = hostile_view(hostile)
    services = hostile_services(writer, view, hostile)
    for text in command_texts(name, hostile):
        reply = await answer_with_services(
            TABLE,
            view,
            services,
            text,
            team_id="T1",
            user_id="UALICE",
            cluster_user="alice",
            now=NOW,
            channel_id="C0LAB",
        )
        assert "internal error" not in reply.text, text
        assert_all_inert(reply)
        # The console shows the same answers in a terminal, where bidi controls reorder too.
        console = answer_from_view(
            TABLE, view, text, team_id="console", user_id="c", cluster_user="alice"
        )
        assert not BIDI & set(for_terminal(console.text))


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
async def test_the_submit_reply_keeps_a_hostile_path_inert(
    writer: StoreWriter, hostile: str
) -> None:
    """Issue 13 item 5: `/sky submit "x`<!channel>`y" --here` posted a working @channel."""
    view = hostile_view(hostile)
    services = hostile_services(writer, view, hostile)
    reply = await answer_with_services(
        TABLE,
        view,
        services,
        f"submit {shlex.quote(hostile)} --here",
        team_id="T1",
        user_id="UALICE",
        cluster_user="alice",
        now=NOW,
    )
    assert reply.text.startswith("Queued as #"), reply.text
    assert_all_inert(reply)


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
async def test_unknown_command_and_help_keep_hostile_text_inert(
    writer: StoreWriter, hostile: str
) -> None:
    view = hostile_view(hostile)
    services = hostile_services(writer, view, hostile)
    for text in (shlex.quote(hostile), f"help {shlex.quote(hostile)}"):
        reply = await answer_with_services(
            TABLE, view, services, text, team_id="T1", user_id="UALICE", now=NOW
        )
        assert_all_inert(reply)


# ------------------------------------------------------------------ what skybot says unprompted

NOTICE_KINDS = sorted(FINAL_STATES | {PREEMPTED, REQUEUED_KIND})


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
def test_job_notices_keep_hostile_text_inert(hostile: str) -> None:
    h = hostile
    notices = []
    for kind in NOTICE_KINDS:
        for array_task in (None, h):
            ended = job(
                7, name=h, partition=h, std_out=h, work_dir=h, gpus_by_type={h: 1},
                array_job_id=7 if array_task else None, array_task=array_task,
                state=kind if kind in FINAL_STATES else "PENDING", start_time=int(NOW - 60),
            )  # fmt: skip
            to_state = REQUEUED if kind in (PREEMPTED, REQUEUED_KIND) else kind
            transition = Transition(ended, "RUNNING", to_state, 1)
            notices.append(
                compose_job_notice(
                    transition,
                    kind,
                    Seen(NOW),
                    NotificationsConfig(),
                    NoticeCluster("skynet"),
                )
            )
    digest = digest_notice(notices, "digest", h)
    tasks = [n.job for n in notices if n.job is not None and n.job.array_job_id is not None]
    ended = array_end_notice(7, tasks, h, NOW)
    started = array_start_notice(notices[0], h, 7)
    for notice in [*notices, digest, ended, started]:
        assert_all_inert(notice.text, notice.blocks)


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
def test_storage_alerts_keep_hostile_text_inert(hostile: str) -> None:
    h = hostile
    directories = [
        DirectoryUsage(h, h, h, datetime(2026, 11, 2), 20 * 1024**3, h),
        DirectoryUsage(h, "alice", f"{h}/a", datetime(2026, 11, 2), 30 * 1024**3, h),
    ]
    filesystems = [FilesystemUsage(h, 100, 99, 1)]
    scan = ClusterSnapshot(
        directories=tuple(directories), filesystems=tuple(filesystems), previous_kib={h: 1}
    )
    top_two = NotificationsConfig(hoard_top_n=2)
    _, hoards = hoarding_alerts({}, scan, top_two, {h: h}, {"alice": ["UALICE"]})
    _, fills = filesystem_alerts({}, scan, NotificationsConfig(), {h: h})
    assert hoards and fills
    for alert in [*hoards, *fills]:
        assert_all_inert(alert.text, alert.blocks)


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
def test_cap_wait_notices_keep_hostile_text_inert(hostile: str) -> None:
    h = hostile
    waiting = [
        job(9, user=h, account=h, state="PENDING", reason="AssocGrpGRES", gpus_by_type={h: 1})
    ]
    running = [job(8, user=h, account=h, gpus_by_type={h: 1})]
    usage = lab_usage(h, h, 1, [*running, *waiting], [h])
    notices = cap_wait_notices({h: 0.0}, [usage], NOW, 60, {h: 3}, h)
    assert notices
    for notice in notices:
        assert_all_inert(notice.text)


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
def test_weekly_digest_keeps_hostile_text_inert(hostile: str) -> None:
    h = hostile
    week = LabWeek(
        h, NOW - 7 * 86400, NOW, 4,
        gpu_hours={(h, False): 10.0, (h, True): 2.0}, requeues={h: 2}, growth={h: (1, 1024**3)},
    )  # fmt: skip
    subscription = DigestChannel(h, "C0LAB", "T1", "UALICE", 0.0)
    for message in digest_messages(week, subscription, UTC, 10):
        assert_all_inert(message.text, message.blocks or [])


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
def test_submission_reports_and_refused_messages_keep_hostile_text_inert(hostile: str) -> None:
    h = hostile
    submission = Submission(1, "T1", "UALICE", h, h, {}, "tag", "failed", None, NOW, 1, "skynet")
    assert_all_inert(report_text(submission, None, h), report_text(submission, 5, None))
    queued = QueuedMessage(1, "k", "C0LAB", literal(h), None, 0, 0.0, 0.0, refused_to="UALICE")
    refused = to_whoever_asked(queued, h)
    assert_all_inert(refused.text, refused.blocks or [])
    spec = ChartSpec(LAB_GPUS, h, NOW - 86400, NOW)
    assert_all_inert(chart_caption(spec), chart_caption(spec, "<@UASKER>"))


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
def test_home_tab_keeps_hostile_text_inert(hostile: str) -> None:
    blocks = linked_blocks(hostile_view(hostile), "alice", "all", True, NOW)
    assert_all_inert(blocks, unlinked_blocks(TABLE))


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
async def test_show_more_of_the_log_keeps_hostile_text_inert(
    writer: StoreWriter, hostile: str
) -> None:
    """A job named and logging anything, to a path with anything in it (as the store recorded
    it, long after it ended), read or refused by the runner with any sentence; and someone
    else's job, whose owner's name is shown in the refusal."""
    h = hostile
    ended = job(7, name=h, state="FAILED", std_err=f"/o/{h}", std_out=h, work_dir=f"/w/{h}")
    bobs = job(8, user=h, name=h, state="FAILED")
    await writer.run(save_slurm_poll, [], [ended, bobs], [], NOW)
    line = (h.encode() + b"\n") * 3
    content = base64.b64encode(b"x" + line * 40).decode()

    async def reads(user: str, request: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "data": content, "start": 900, "size": 5000}

    answers = []
    for runner in (reads, hostile_services(writer, make_view(make_snapshot()), h).runner):
        services = hostile_services(writer, make_view(make_snapshot()), h)
        services.runner = runner
        for action_id, value in (
            (f"{LOG_MORE}:7:err", "7:err:4000"),
            (f"{LOG_MORE}:7:out", "7:out:4000"),
            (f"{LOG_MORE}:8:err", "8:err:4000"),
        ):
            answers.append(
                await more_clicked(
                    make_view(make_snapshot()), services, "T1", "UALICE", action_id, value
                )
            )
    assert [a.refused for a in answers] == [False, False, True] * 2
    for answer in answers:
        assert_all_inert(answer.text, answer.blocks)
    tail = OutputTail(f"/o/{h}", b"x" + line * 40, 900, 5000)
    notice = compose_job_notice(
        Transition(ended, "RUNNING", "FAILED", 0),
        "FAILED",
        Seen(NOW, output=[tail]),
        NotificationsConfig(log_tail_lines=15),
        NoticeCluster("skynet"),
    )
    assert notice.blocks[-1]["type"] == "actions"
    assert_all_inert(notice.text, notice.blocks)


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
async def test_link_refusals_and_link_notices_keep_hostile_text_inert(
    writer: StoreWriter, hostile: str
) -> None:
    """The runner's refusal and fix commands (a link file others can write) and the DM to a
    Slack account linked before. (Admin links are valid user names: the config checks them.)"""
    view = make_view(make_snapshot())
    services = hostile_services(writer, view, hostile)

    async def refuses_with_fixes(user: str, request: dict[str, Any]) -> dict[str, Any]:
        return {"ok": False, "error": hostile, "fix": [hostile, f"setfacl -x u:{hostile} ~"]}

    services.runner = refuses_with_fixes
    await services.identity.start_link("T1", "UASKER", "alice")
    reply = await answer_with_services(
        TABLE, view, services, "link check", team_id="T1", user_id="UASKER", now=NOW
    )
    assert reply.text.startswith("Not linked") and "```" in reply.text
    assert_all_inert(reply)
    for replaced in (True, False):
        assert_all_inert(new_link_notice(hostile, "UASKER", hostile, replaced=replaced))


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
def test_start_dms_and_watch_dms_keep_hostile_text_inert(hostile: str) -> None:
    h = hostile
    running = job(
        7, name=h, partition=h, std_out=h, work_dir=h, nodes=h, gpus_by_type={h: 2},
        start_time=int(NOW - 60), time_limit_minutes=90,
    )  # fmt: skip
    notice = start_notice(Transition(running, "PENDING", "RUNNING", 0), NoticeCluster(h, h))
    assert_all_inert(notice.text, notice.blocks)
    for overcap in (False, True):
        watch = Watch(3, "T1", "U1", h, h, 2, overcap, h, h, h, NOW - 60, NOW + 60)
        fired = Outcome(watch, FIRED, Spot(h, 4), 2)
        texts = [fired_text(fired), expired_text(watch), watch_line(watch, NOW), free_now(fired)]
        listing = watch_list([watch], NOW)
        assert_all_inert(*texts, listing.text, listing.blocks)


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
def test_limits_reservations_and_priorities_keep_hostile_text_inert(hostile: str) -> None:
    """What Slurm names in its limits (partitions, QOS, reservations, their nodes and users)
    reaches `/sky why`, `free`, `gpus` and the alert channel as inert text."""
    h = hostile
    reservation = Reservation(
        h, int(NOW + 3600), int(NOW + 7200), (h, "clippy"), ("MAINT", h), (h,)
    )
    limits = SlurmLimits(
        (PartitionLimits(h, 60, 1, h),),
        (QosLimits(h, 2, 30, 1),),
        (reservation, replace(reservation, start=int(NOW - 60))),
        (PendingPriority(110, 5, PriorityFactors(1, 2, 3)), PendingPriority(111, 9)),
        PriorityFactors(10, 10, 10),
    )
    pending = [
        job(105 + i, name=h, state="PENDING", reason=reason, partition=h, qos=h, account=h,
            time_limit_minutes=600, gpus_by_type={h: 2})
        for i, reason in enumerate(
            ["PartitionTimeLimit", "PartitionNodeLimit", "QOSMaxGRESPerUser",
             "QOSMaxWallDurationPerJobLimit", "ReqNodeNotAvail", "Priority", "Reservation"]
        )
    ]  # fmt: skip
    nodes = (node(h, h, total=4, partitions=(h,)), node("clippy", "a40", total=8))
    view = make_view(make_snapshot(TAKEN_AT, jobs=tuple(pending), nodes=nodes, limits=limits))
    for each in pending:
        assert_all_inert("\n".join(explain(view, each, NOW)))
    for text in ("free", "gpus hoffman-lab"):
        reply = answer_from_view(
            TABLE, view, text, team_id="T1", user_id="UALICE", cluster_user="alice", now=NOW
        )
        assert_all_inert(reply)
    assert_all_inert(announcement(reservation, NOW, h))


# Modules that build what skybot posts; each is exercised above (commands through the table).
@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
def test_the_job_form_keeps_hostile_text_inert(hostile: str) -> None:
    """Lab, partition, GPU type and storage names from the cluster, and every field typed."""
    view = hostile_view(hostile)
    choices = form_choices(view, "alice")
    errors = check_form(dict.fromkeys(FIELDS, hostile), choices)
    assert isinstance(errors, dict) and errors
    good = {
        PLACE: "lab:hoffman-lab",
        GPU_TYPE: "a40",
        GPU_COUNT: "1",
        TIME: "1:00:00",
        WORKDIR: "/srv/hoffman-lab/flash9/alice",
        COMMAND: "python " + " ".join(hostile.split())[:900],
    }
    job = check_form(good, choices)
    assert isinstance(job, ComposedJob), job
    script = job.script(TemplateSettings(), view)
    review = review_view("skynet", good, summary(hostile, "", hostile, hostile), script)
    done = done_view("skynet", f"Queued: {literal(hostile)}")
    # What Slack renders: the blocks (private_metadata is only ever sent back to skybot).
    views = (form_view("skynet", choices), review, done)
    assert_all_inert(*(v["blocks"] for v in views), list(errors.values()))


COVERED = {
    "core/job_modal.py",  # test_the_job_form_keeps_hostile_text_inert
    "core/job_notices.py",
    "core/storage_alerts.py",
    "core/cap_waits.py",
    "core/digest.py",
    "scheduler/digest.py",
    "scheduler/submit_worker.py",
    "scheduler/outbox_policy.py",
    # These wrap the notices above into outbox rows and add no text.
    "scheduler/watchers/job_dms.py",
    "scheduler/watchers/storage.py",
    "scheduler/watchers/cap_waits.py",
    "scheduler/watchers/gpu_watches.py",
    "scheduler/watchers/job_starts.py",
    "scheduler/watchers/reservations.py",  # core/reservations.py's announcement, tested above
    "core/start_notices.py",
    "core/array_notices.py",
    "core/summary_notices.py",
    "scheduler/watchers/array_dms.py",
    "handlers/buttons/remove_watch.py",  # the list of handlers/commands/watch.py, tested above
    "handlers/charts.py",
    # Relays answers built (and escaped) by the handlers above to a DM, with a fixed note.
    "handlers/click_answers.py",
    "handlers/home.py",
    "handlers/identity.py",
    "handlers/buttons/show_more_log.py",
    "handlers/router.py",
    "handlers/deadline.py",  # the router's "working on it", naming only the subcommand
    "handlers/reply.py",
    "core/blocks.py",  # the block helpers themselves
    "handlers/slash.py",  # the Slack ingress: tests/test_slack_input.py
}
MESSAGE_BUILDERS = re.compile(
    r"\b(OutboxMessage|JobNotice|CapWaitNotice|Alert|Reply|simple|section|context|header)\("
)


def test_every_message_builder_is_covered() -> None:
    root = Path(__file__).resolve().parent.parent
    builders = set()
    for package in ("core", "handlers", "scheduler", "bot"):
        for path in (root / package).rglob("*.py"):
            relative = path.relative_to(root).as_posix()
            if relative.startswith("handlers/commands/"):
                continue  # every command is run through the command table above
            if MESSAGE_BUILDERS.search(path.read_text()):
                builders.add(relative)
    assert builders - COVERED == set(), "add these message builders to the hostile-text tests"
