"""The outbox and its sender against the Slack stand-in: delayed by 429s and 5xx, never lost,
never sent twice; decisions replayed after a crash are enqueued once."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from core.chart_specs import LAB_GPUS, ChartFile, ChartSpec
from core.cluster_config import ClusterConfig
from core.transitions import Transition
from scheduler.outbox_sender import OutboxSender
from scheduler.watchers.job_dms import (
    BATCH,
    notify_transitions,
    process_transitions,
)
from scheduler.watchers.storage import storage_alerts_in_db
from store.alerts import load_cursor, save_preference
from store.caps_and_storage import save_storage
from store.outbox import OutboxMessage, enqueue, mark_sent, outbox_rows
from store.snapshots import load_snapshot
from store.transitions import pending_transition_users
from store.writer import StoreWriter
from tests.support.cluster import wait_for
from tests.support.factories import CLUSTER, directory_usage, filesystem_usage, job
from tests.support.job_dm_inputs import Links, config_with
from tests.support.outbox_sender import (
    TEAM,
    client_for,
    delivered,
    loop_clock,
    put,
    running,
    sender_for,
    states,
    wait_until_settled,
)
from tests.support.slack_standin import SlackStandIn, SlackUser
from tests.support.slurm_polls import save_slurm_poll

# The sender's waits (pacing, back-off, Retry-After, token probes) pass in the event loop's
# time, which looptime fast-forwards: the tests keep their seconds-long design and take
# milliseconds. The sender reads the same time through `loop_clock`.
pytestmark = pytest.mark.looptime

ALICE = SlackUser("U1", "alice")
BOB = SlackUser("U2", "bob")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "skybot.db"


@pytest.fixture
def writer(db_path: Path) -> Iterator[StoreWriter]:
    w = StoreWriter(db_path)
    yield w
    w.close()


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    async with SlackStandIn(users=[ALICE, BOB]) as standin:
        yield standin


async def more_passes(sender: OutboxSender, count: int = 2, timeout: float = 10.0) -> None:
    """Until the running `sender` has finished `count` more passes over the outbox, woken at
    once: whatever it would send from the outbox as it stands now, it has sent by then."""
    target = sender.passes + count

    def passed() -> bool:
        if sender.passes >= target:
            return True
        sender.wake()
        return False

    await wait_for(passed, timeout, f"the sender's {count} more passes", 0.01, in_thread=False)


# ------------------------------------------------------------------------------ delivery


async def test_delivers_dms_and_channel_posts_and_marks_them_sent(
    writer: StoreWriter, slack: SlackStandIn
) -> None:
    await put(
        writer,
        OutboxMessage(
            "a",
            "U1",
            "hello alice",
            [{"type": "section", "text": {"type": "mrkdwn", "text": "hello alice"}}],
        ),
        OutboxMessage("b", "#skynet-users", "hello channel"),
    )
    report = await sender_for(writer, client_for(slack)).send_due()
    assert (report.sent, report.retried, report.parked, report.next_due) == (2, 0, 0, None)
    assert delivered(slack) == [("U1", "hello alice"), ("#skynet-users", "hello channel")]
    dm = slack.dm_channel_for("U1")
    assert [m["text"] for (ch, _), m in slack.messages.items() if ch == dm] == ["hello alice"]
    rows = await writer.run(outbox_rows)
    assert [(r["state"], r["attempts"], r["slack_channel"]) for r in rows] == [
        ("sent", 1, dm),
        ("sent", 1, "#skynet-users"),
    ]
    assert all(r["slack_ts"] and r["sent_at"] for r in rows)


async def test_429_storm_delays_but_loses_nothing_and_keeps_order(
    writer: StoreWriter, slack: SlackStandIn
) -> None:
    slack.fail_next("chat.postMessage", status=429, retry_after=1, times=5)
    await put(writer, *(OutboxMessage(f"m{i}", "C1", f"message {i}") for i in range(3)))
    clock = loop_clock()
    started = clock()
    async with running(sender_for(writer, client_for(slack, rate_limit_retries=1), clock=clock)):
        await wait_until_settled(writer)
    calls = slack.calls_to("chat.postMessage")
    assert [c.status for c in calls] == [429] * 5 + [200] * 3
    assert delivered(slack) == [("C1", "message 0"), ("C1", "message 1"), ("C1", "message 2")]
    assert await states(writer) == [("m0", "sent"), ("m1", "sent"), ("m2", "sent")]
    # Five Retry-After: 1 s waits, in the SDK or in the outbox, before the first got through.
    assert clock() - started >= 5.0
    rows = await writer.run(outbox_rows)
    # m0: two outbox attempts ran out of SDK retries, the third got through.
    assert [r["attempts"] for r in rows] == [3, 1, 1]


async def test_server_errors_are_retried_with_backoff_and_lose_nothing(
    writer: StoreWriter, slack: SlackStandIn
) -> None:
    slack.fail_next("chat.postMessage", status=500, times=3)
    slack.fail_next("chat.postMessage", status=503, times=1)
    await put(
        writer,
        OutboxMessage("a1", "U1", "alice 1"),
        OutboxMessage("b1", "U2", "bob 1"),
        OutboxMessage("a2", "U1", "alice 2"),
    )
    async with running(sender_for(writer, client_for(slack))):
        await wait_until_settled(writer)
    calls = slack.calls_to("chat.postMessage")
    assert sum(1 for c in calls if c.status >= 500) == 4
    got = delivered(slack)
    assert sorted(got) == [("U1", "alice 1"), ("U1", "alice 2"), ("U2", "bob 1")]
    # Each person's messages arrive in the order they were enqueued.
    assert [t for ch, t in got if ch == "U1"] == ["alice 1", "alice 2"]
    rows = {r["key"]: r for r in await writer.run(outbox_rows)}
    assert {k: r["state"] for k, r in rows.items()} == {"a1": "sent", "b1": "sent", "a2": "sent"}
    assert rows["a1"]["last_error"] is None


async def test_permanent_failures_are_parked_with_the_error_and_not_retried(
    writer: StoreWriter, slack: SlackStandIn
) -> None:
    slack.fail_next("chat.postMessage", error="is_archived")
    await put(
        writer,
        OutboxMessage("archived", "C-old", "to an archived channel"),
        OutboxMessage("ghost", "U404", "to a user Slack does not know"),
        OutboxMessage("fine", "U1", "to alice"),
    )
    sender = sender_for(writer, client_for(slack))
    report = await sender.send_due()
    assert (report.sent, report.parked, report.next_due) == (1, 2, None)
    rows = {r["key"]: (r["state"], r["last_error"]) for r in await writer.run(outbox_rows)}
    assert rows == {
        "archived": ("parked", "is_archived"),
        "ghost": ("parked", "user_not_found"),
        "fine": ("sent", None),
    }
    async with running(sender):
        await more_passes(sender)
    assert len(slack.calls_to("chat.postMessage")) == 3  # nothing tried again
    assert await writer.run(outbox_rows, "queued") == []  # nor ever will be


async def test_nothing_marked_sent_is_ever_sent_again(
    writer: StoreWriter, db_path: Path, slack: SlackStandIn
) -> None:
    await put(writer, OutboxMessage("once", "U1", "only once"))
    await sender_for(writer, client_for(slack)).send_due()
    # Another pass, a fresh sender, the same key enqueued again, a late mark_sent: no resend.
    await sender_for(writer, client_for(slack)).send_due()
    assert await put(writer, OutboxMessage("once", "U1", "only once")) == 0
    row = (await writer.run(outbox_rows))[0]
    assert await writer.run(mark_sent, row["id"], time.time()) is False
    second = StoreWriter(db_path)
    try:
        fresh = sender_for(second, client_for(slack))
        async with running(fresh):
            await more_passes(fresh)
            assert await second.run(outbox_rows, "queued") == []  # nor ever will be
    finally:
        second.close()
    assert delivered(slack) == [("U1", "only once")]


async def test_a_restart_delivers_what_was_queued(db_path: Path, slack: SlackStandIn) -> None:
    first = StoreWriter(db_path)
    try:
        await put(first, OutboxMessage("q1", "U1", "queued before the restart"))
        await put(first, OutboxMessage("q2", "C1", "this one too"))
        # Slack is unreachable for the first bot: both stay queued, with the error noted.
        dead = AsyncWebClient(token=slack.bot_token, base_url="http://127.0.0.1:9/api/")
        report = await sender_for(first, dead).send_due()
        assert (report.sent, report.retried) == (0, 2)
    finally:
        first.close()
    second = StoreWriter(db_path)
    try:
        rows = await second.run(outbox_rows)
        assert [(r["state"], r["attempts"]) for r in rows] == [("queued", 1), ("queued", 1)]
        assert all(r["last_error"].startswith("network:") for r in rows)
        async with running(sender_for(second, client_for(slack))):
            await wait_until_settled(second)
    finally:
        second.close()
    assert delivered(slack) == [("U1", "queued before the restart"), ("C1", "this one too")]


async def test_at_most_one_message_per_second_per_channel(
    writer: StoreWriter, slack: SlackStandIn
) -> None:
    sent_at: dict[str, list[float]] = {}
    original = slack.api.chat_post_message
    clock = loop_clock()

    def timed(params: dict[str, Any]) -> dict[str, Any]:
        sent_at.setdefault(str(params["channel"]), []).append(clock())
        return original(params)

    slack.register_method("chat.postMessage", timed)
    await put(
        writer,
        *(OutboxMessage(f"{ch}{i}", ch, f"{ch} {i}") for i in range(3) for ch in ("C1", "C2")),
    )
    async with running(sender_for(writer, client_for(slack), per_channel_per_second=1.0)):
        await wait_until_settled(writer)
    for channel in ("C1", "C2"):
        times = sent_at[channel]
        assert len(times) == 3
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert min(gaps) >= 0.95, gaps
    # The two channels are paced independently: C2 did not wait for C1's second.
    assert abs(sent_at["C2"][0] - sent_at["C1"][0]) < 0.5


# ------------------------------------------------------------------------------ decisions


async def record_jobs(writer: StoreWriter) -> None:
    """Two polls: alice's job 1 fails, her job 2 is preempted on overcap, bob's job 3 ends."""
    running_jobs = [
        job(1, start_time=1000),
        job(2, partition="overcap", account="overcap", start_time=1000),
        job(3, user="bob", start_time=1000),
    ]
    await writer.run(save_slurm_poll, running_jobs, [], [], 1100.0)
    await writer.run(
        save_slurm_poll,
        [
            job(
                2,
                partition="overcap",
                account="overcap",
                state="PENDING",
                restarts=1,
                # What squeue says of a requeued job (seen on the test cluster): the forecast
                # start of its next run and a nonsense end.
                start_time=1300,
                end_time=6090945408,
            )
        ],
        [
            job(1, state="FAILED", exit_code=2, start_time=1000, end_time=1150),
            job(3, user="bob", state="COMPLETED", start_time=1000, end_time=1160),
        ],
        [],
        1200.0,
    )


async def test_job_transitions_become_dms_once_and_the_cursor_moves(
    writer: StoreWriter, slack: SlackStandIn
) -> None:
    await record_jobs(writer)
    links = Links({"alice": [(TEAM, "U1")], "bob": [(TEAM, "U2")]})
    await writer.run(save_preference, TEAM, "U2", "fail", 0.0)  # bob: no COMPLETED DMs
    config = config_with()
    assert await process_transitions(writer, links, config, ClusterConfig(CLUSTER)) == 2
    assert await process_transitions(writer, links, config, ClusterConfig(CLUSTER)) == 0
    assert [k for k, _ in await states(writer)] == [
        f"job:skynet:1:0:FAILED:{TEAM}:U1",
        f"job:skynet:2:0:PREEMPTED:{TEAM}:U1",
    ]
    assert await writer.run(load_cursor, CLUSTER) == 6  # 3 started, then FAILED/REQUEUED/COMPLETED
    async with running(sender_for(writer, client_for(slack))):
        await wait_until_settled(writer)
    texts = [t for _, t in delivered(slack)]
    assert texts[0].startswith("❌ Job 1 `job1` failed with exit code 2.")
    assert texts[1].startswith("🔁 Job 2 `job2` was preempted and requeued (restart 1).")
    assert "Runtime lost: 3 min, unless the job saved a checkpoint." in texts[1]


async def test_unlinked_users_and_preference_off_get_nothing(writer: StoreWriter) -> None:
    await record_jobs(writer)
    await writer.run(save_preference, TEAM, "U1", "off", 0.0)
    links = Links({"alice": [(TEAM, "U1")]})  # bob never linked
    assert await process_transitions(writer, links, config_with(), ClusterConfig(CLUSTER)) == 0
    assert await writer.run(outbox_rows) == []
    assert await writer.run(load_cursor, CLUSTER) == 6


async def test_a_job_decision_replayed_after_a_crash_is_enqueued_once(
    writer: StoreWriter,
) -> None:
    await record_jobs(writer)
    links = {"alice": [(TEAM, "U1")], "bob": [(TEAM, "U2")]}
    settings = config_with()

    def crash_before_commit(db: Any) -> None:
        with db.atomic():
            _, through = pending_transition_users(db, CLUSTER, BATCH)
            notify_transitions(db, ClusterConfig(CLUSTER), links, through, settings)
            raise RuntimeError("power cut")

    with pytest.raises(RuntimeError):
        await writer.run(crash_before_commit)
    assert await writer.run(outbox_rows) == [] and await writer.run(load_cursor, CLUSTER) == 0

    _, through = await writer.run(pending_transition_users, CLUSTER, BATCH)
    assert through is not None
    assert (
        await writer.run(notify_transitions, ClusterConfig(CLUSTER), links, through, settings) == 3
    )
    # Replayed with the same inputs: the cursor says done; even with the cursor wound back
    # (the decision made a second time), the keys already in the outbox are ignored.
    assert (
        await writer.run(notify_transitions, ClusterConfig(CLUSTER), links, through, settings) == 0
    )

    def wind_back(db: Any) -> None:
        with db.atomic():
            db.execute("UPDATE notify_cursors SET value = 0")

    await writer.run(wind_back)
    assert (
        await writer.run(notify_transitions, ClusterConfig(CLUSTER), links, through, settings) == 0
    )
    assert len(await writer.run(outbox_rows)) == 3


async def test_a_storage_decision_replayed_is_enqueued_once(writer: StoreWriter) -> None:
    root = "/srv/hoffman-lab/flash9"
    await writer.run(
        save_storage,
        CLUSTER,
        [directory_usage("alice", 20 * 1024**3, root=root)],
        [filesystem_usage(root, 55, 53)],
        100.0,
    )
    snapshot = await writer.run(load_snapshot, CLUSTER)
    settings = config_with()
    ids = {"alice": ["U1"]}
    assert (
        await writer.run(storage_alerts_in_db, snapshot, ids, settings, settings.default_cluster)
        == 2
    )

    def forget_state(db: Any) -> None:
        with db.atomic():
            db.execute("DELETE FROM hoard_alerts")
            db.execute("DELETE FROM filesystem_alerts")

    await writer.run(forget_state)
    assert (
        await writer.run(storage_alerts_in_db, snapshot, ids, settings, settings.default_cluster)
        == 0
    )
    rows = await writer.run(outbox_rows)
    assert [(r["key"], r["target"]) for r in rows] == [
        (f"fs:{CLUSTER}:{root}:95:1", "#skynet-users"),
        (f"hoard:{CLUSTER}:{root}/alice:2024-05-06T03:00:00", "#skynet-users"),
    ]
    assert rows[1]["text"].startswith(f"📦 <@U1>: `{root}/alice` holds 20.0T")


async def test_a_job_array_ending_sends_one_dm(writer: StoreWriter) -> None:
    tasks = [job(100 + i, array_job_id=100, array_task=str(i), start_time=10) for i in range(8)]
    await writer.run(save_slurm_poll, tasks, [], [], 20.0)
    ended = [replace(t, state="COMPLETED", end_time=30) for t in tasks]
    await writer.run(save_slurm_poll, [], ended, [], 40.0)
    assert (
        await process_transitions(
            writer, Links({"alice": [(TEAM, "U1")]}), config_with(), ClusterConfig(CLUSTER)
        )
        == 1
    )
    (row,) = await writer.run(outbox_rows)
    assert row["key"] == f"array:skynet:100:end:{TEAM}:U1"
    assert row["text"].splitlines()[0] == "✅ Array job 100 `job100` ended: 8 tasks, 8 completed."


def test_transition_record_round_trips_through_the_store(tmp_path: Path) -> None:
    # The notifier decodes job_transitions.record; a Transition built from it equals the
    # poller's own.
    from core.record_codec import decode_job
    from store.db import open_db

    db = open_db(tmp_path / "t.db")
    save_slurm_poll(db, [job(1)], [], [], 1.0)
    (transition,) = save_slurm_poll(db, [], [job(1, state="TIMEOUT")], [], 2.0)
    row = db.execute(
        "SELECT record, from_state, to_state, restarts FROM job_transitions WHERE id = 2"
    ).fetchone()
    assert Transition(decode_job(row[0]), row[1], row[2], row[3]) == transition


async def draw_placeholder(spec: ChartSpec) -> ChartFile:
    """Charts as the sender sees them; drawing is tested in test_charts.py."""
    return ChartFile(b"\x89PNG placeholder", spec.filename, spec.lab, "a chart")


async def test_what_a_channel_refuses_goes_to_whoever_asked_for_it(
    writer: StoreWriter, slack: SlackStandIn
) -> None:
    chart = ChartSpec(LAB_GPUS, "hoffman-lab", 0.0, 1.0)
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*the digest*"}}]
    await writer.run(
        enqueue,
        [
            OutboxMessage("chart:asked", "C0LAB", "*hoffman-lab*: GPUs", chart=chart,
                          refused_to=ALICE.id),
            OutboxMessage("digest:week", "C0DIGEST", "the digest", blocks, refused_to=BOB.id),
            OutboxMessage("chart:nobody", "C0OTHER", "*hoffman-lab*: week", chart=chart),
        ],
        time.time(),
    )  # fmt: skip
    slack.fail_next("files.completeUploadExternal", error="not_in_channel", times=2)
    slack.fail_next("chat.postMessage", error="is_archived")
    report = await sender_for(writer, client_for(slack), charts=draw_placeholder).send_due()
    assert (report.sent, report.parked) == (2, 3)
    rows = {r["key"]: r for r in await writer.run(outbox_rows)}
    assert [rows[k]["state"] for k in ("chart:asked", "digest:week", "chart:nobody")] == [
        "parked",
        "parked",
        "parked",
    ]
    assert rows["chart:asked"]["last_error"] == "not_in_channel"
    chart_to_alice = rows["chart:asked:refused"]
    assert chart_to_alice["state"] == "sent" and chart_to_alice["target"] == ALICE.id
    assert chart_to_alice["text"] == (
        "I could not post this in <#C0LAB> (Slack said `not_in_channel`): skybot must be a "
        "member there, `/invite @skybot`. Here it is.\n*hoffman-lab*: GPUs"
    )
    (file,) = [f for f in slack.files.values() if f.completed]
    assert file.channel_id == slack.dm_channel_for(ALICE.id)
    assert file.content == b"\x89PNG placeholder"
    # The digest text reaches bob's DM, blocks and all, with why in front.
    (posted,) = [
        m for (channel, _), m in slack.messages.items() if channel == slack.dm_channel_for(BOB.id)
    ]
    assert posted["blocks"][0]["text"]["text"].startswith(
        "I could not post this in <#C0DIGEST> (Slack said `is_archived`)"
    )
    assert posted["blocks"][1:] == blocks
    # Nobody to tell: parked for the admins, nothing else sent.
    assert "chart:nobody:refused" not in rows


# ------------------------------------------------------------------------------ the token


@pytest.mark.parametrize("error", ["account_inactive", "invalid_auth", "token_revoked"])
async def test_a_refused_token_pauses_the_sender_and_parks_nothing(
    error: str, writer: StoreWriter, slack: SlackStandIn
) -> None:
    slack.refuse_bot_token(error)
    outcomes: list[str] = []
    await put(
        writer, *(OutboxMessage(f"m{i}", ("U1", "U2", "C1")[i % 3], f"m {i}") for i in range(6))
    )
    sender = sender_for(writer, client_for(slack), token_probe_seconds=0.2, observe=outcomes.append)
    async with running(sender):
        await slack.wait_for_calls("auth.test", 3, timeout=30)  # probing, not sending
        assert sender.paused is not None and sender.paused.error == error
        rows = await writer.run(outbox_rows)
        assert [(r["state"], r["attempts"], r["last_error"]) for r in rows] == [
            ("queued", 0, None)
        ] * 6
        # One message found out; nobody else was tried while the token is refused.
        assert len(slack.calls_to("chat.postMessage")) == 1
        slack.accept_bot_token()
        await wait_until_settled(writer)
        assert sender.paused is None
    assert sorted(t for _, t in delivered(slack)) == [f"m {i}" for i in range(6)]
    assert await states(writer) == [(f"m{i}", "sent") for i in range(6)]
    assert outcomes == [error] + ["ok"] * 6


async def test_a_missing_scope_is_the_messages_problem_not_a_pause(
    writer: StoreWriter, slack: SlackStandIn
) -> None:
    slack.fail_next("chat.postMessage", error="missing_scope")
    await put(writer, OutboxMessage("a", "U1", "to alice"), OutboxMessage("b", "U2", "to bob"))
    sender = sender_for(writer, client_for(slack), retry_base_seconds=3600)
    report = await sender.send_due()
    assert sender.paused is None
    assert (report.sent, report.retried, report.parked) == (1, 1, 0)


# ------------------------------------------------------------------------------ outages


async def test_connection_errors_back_off_at_most_a_minute(writer: StoreWriter) -> None:
    await put(writer, OutboxMessage("a", "U1", "after a long outage"))
    await writer.run(lambda db: db.execute("UPDATE outbox SET attempts = 20"))
    dead = AsyncWebClient(token="xoxb-unused", base_url="http://127.0.0.1:9/api/")
    clock = loop_clock()
    before = clock()
    report = await sender_for(writer, dead, retry_base_seconds=5.0, clock=clock).send_due()
    assert report.retried == 1
    (row,) = await writer.run(outbox_rows)
    assert row["state"] == "queued"
    assert before + 5 <= row["next_attempt_at"] <= clock() + 60


async def test_messages_waiting_on_an_outage_go_out_when_the_link_is_back(
    writer: StoreWriter, slack: SlackStandIn
) -> None:
    slack.fail_next("chat.postMessage", status=503, times=2)
    await put(writer, OutboxMessage("a", "U1", "to alice"), OutboxMessage("b", "U2", "to bob"))
    # Retries a minute apart (the most a 5xx waits): only link_restored() brings them forward.
    sender = sender_for(writer, client_for(slack), retry_base_seconds=3600)
    async with running(sender):
        await slack.wait_for_calls("chat.postMessage", 2, timeout=10)
        await more_passes(sender)
        assert len(slack.calls_to("chat.postMessage")) == 2
        rows = await writer.run(outbox_rows)
        assert [r["state"] for r in rows] == ["queued", "queued"]
        # Not retried on their own for a while yet (5xx retries wait up to a minute).
        assert all(r["next_attempt_at"] > loop_clock()() + 30 for r in rows)
        sender.link_restored()
        await wait_until_settled(writer)
    assert sorted(delivered(slack)) == [("U1", "to alice"), ("U2", "to bob")]


async def test_a_retry_waiting_when_the_clock_steps_back_an_hour_still_goes_out_on_time(
    writer: StoreWriter, slack: SlackStandIn
) -> None:
    """Issue 28: a queued retry did not run for the hour NTP stepped the clock back."""
    slack.fail_next("chat.postMessage", status=500, times=1)
    step = [0.0]
    base = loop_clock()
    sender = sender_for(
        writer, client_for(slack), retry_base_seconds=1.0, clock=lambda: base() + step[0]
    )
    await put(writer, OutboxMessage("r1", "U1", "retried"))
    started = time.monotonic()
    async with running(sender):
        await wait_for_call_count(slack, 1)  # failed; retry due in 1 s
        step[0] = -3600.0
        sender.clock_stepped(-3600.0)
        await wait_until_settled(writer, timeout=10)
    assert delivered(slack) == [("U1", "retried")]
    assert time.monotonic() - started < 5


async def wait_for_call_count(slack: SlackStandIn, count: int) -> None:
    await wait_for(
        lambda: len(slack.calls_to("chat.postMessage")) >= count,
        10,
        f"{count} chat.postMessage calls",
        0.02,
        in_thread=False,
    )
