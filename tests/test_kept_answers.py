"""Answers kept per snapshot (Command.same_for) and texts read once (CommandTable.read): the
ack path works an answer out once per snapshot and only stamps its freshness per ack. What
is kept must read exactly as an answer worked out afresh, at every `now`, for every asker."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.records import LabCap
from core.view import ClusterView
from handlers.commands import command_table
from handlers.commands.common import answer, freshness_lines
from handlers.kept_answers import MAX_KEPT_ANSWERS
from handlers.reply import MAX_BLOCKS, Reply, context, lines_to_sections, section
from handlers.router import (
    MAX_TEXT_KEPT,
    MAX_TEXTS_KEPT,
    Command,
    CommandRequest,
    CommandTable,
    dispatch,
)
from tests.support.asking import answer_from_view
from tests.support.factories import job, make_snapshot, make_view
from tests.support.sample_cluster import NOW, TAKEN_AT, cluster
from tests.support.two_cluster_desks import desks_of, two_clusters

KEPT = ("gpus hoffman-lab", "gpus kira-lab", "gpus", "free", "free a40", "df")


def fresh_table() -> CommandTable:
    """The commands with nothing kept: every answer worked out afresh."""
    table = CommandTable()
    for command in command_table().all():
        table.add(replace(command, same_for=None))
    return table


def ask(
    table: CommandTable, view: ClusterView, text: str, now: float = NOW, **asker: object
) -> Reply:
    who: dict[str, object] = {"team_id": "T1", "user_id": "U1", "cluster_user": "alice"}
    return answer_from_view(table, view, text, now=now, **(who | asker))


def kept(view: ClusterView) -> dict[object, object]:
    return view.memo("kept answers", dict)


@pytest.mark.parametrize("text", KEPT)
def test_a_kept_answer_reads_as_a_fresh_one_at_every_age(text: str) -> None:
    """Stamped at later `now`s: the age moves, and past 120 s (slurm) the stale warnings
    appear, exactly as an answer worked out at that moment has them."""
    table, view = command_table(), cluster()
    ask(table, view, text)
    assert kept(view), f"{text!r} was not kept"
    for later in (0, 0.4, 1, 59, 61, 119, 121, 3599, 3601, 2 * 86400):
        for here in ("", " --here"):
            now = NOW + later
            got = ask(table, view, text + here, now=now)
            assert got == ask(fresh_table(), view, text + here, now=now)
            assert got.in_channel == bool(here)


def test_a_failing_source_shows_in_a_kept_answer_as_in_a_fresh_one() -> None:
    view = make_view(
        make_snapshot(TAKEN_AT, errors={"slurm": "Connection refused"}, **_fields(cluster()))
    )
    table = command_table()
    for now in (NOW, NOW + 30, NOW + 600):
        got = ask(table, view, "gpus hoffman-lab", now=now)
        assert "slurmctld" in got.text
        assert got == ask(fresh_table(), view, "gpus hoffman-lab", now=now)


def _fields(view: ClusterView) -> dict[str, object]:
    snapshot = view.snapshot
    return {
        "jobs": snapshot.jobs,
        "nodes": snapshot.nodes,
        "caps": snapshot.caps,
        "members": snapshot.members,
        "directories": snapshot.directories,
        "filesystems": snapshot.filesystems,
    }


def test_a_new_snapshot_answers_from_itself_not_from_what_the_last_one_kept() -> None:
    table = command_table()
    before = cluster()
    assert "4/4 GPUs in use (at cap)" in ask(table, before, "gpus hoffman-lab").text
    after = cluster(caps=(LabCap("hoffman-lab", 8), LabCap("kira-lab", 8)))
    text = ask(table, after, "gpus hoffman-lab").text
    assert "4/8 GPUs in use (4 free under the cap)" in text
    assert text == ask(fresh_table(), after, "gpus hoffman-lab").text
    # And the same words again, on the new snapshot, are its answer still.
    assert ask(table, after, "gpus hoffman-lab").text == text


def test_gpus_without_a_lab_is_kept_per_asker_and_never_shown_to_another() -> None:
    table, view = command_table(), cluster()
    alice = ask(table, view, "gpus", cluster_user="alice")
    carol = ask(table, view, "gpus", cluster_user="carol")
    assert "*`hoffman-lab`*" in alice.text and "kira-lab" not in alice.text
    assert "*`kira-lab`*" in carol.text and "hoffman-lab" not in carol.text
    for user in ("alice", "carol", "bob", "zed", None):
        got = ask(table, view, "gpus", cluster_user=user, user_id=f"U-{user}")
        assert got == ask(fresh_table(), view, "gpus", cluster_user=user, user_id=f"U-{user}")
    # Someone skybot cannot place is told to name a lab, after alice's answer was kept.
    assert "I don't know your lab" in ask(table, view, "gpus", cluster_user=None).text


def test_a_named_lab_is_one_answer_for_every_asker() -> None:
    table, view = command_table(), cluster()
    for user in ("alice", "carol", None):
        assert ask(table, view, "gpus kira-lab", cluster_user=user) == ask(
            fresh_table(), view, "gpus kira-lab", cluster_user=user
        )
    assert len(kept(view)) == 1


def test_what_a_command_adds_to_its_answer_is_never_dropped_by_keeping_it() -> None:
    """A command opted in that adds to `answer()`'s reply (as `jobs` adds its buttons) is
    worked out every time: the stamp would not say all of it."""
    runs = []

    def with_button(request: CommandRequest, view: ClusterView) -> Reply:
        runs.append(request.now)
        reply = answer(view, request, ["body"], "slurm")
        return replace(reply, blocks=[*reply.blocks, {"type": "actions", "elements": []}])

    table = CommandTable()
    table.add(Command("x", "x", "x", with_button, same_for=lambda args, asker: None))
    view = cluster()
    first, second = ask(table, view, "x"), ask(table, view, "x", now=NOW + 5)
    assert runs == [NOW, NOW + 5]
    assert first.blocks[-1]["type"] == second.blocks[-1]["type"] == "actions"
    assert not kept(view)


def test_kept_answers_per_snapshot_are_bounded() -> None:
    members = frozenset({"alice", *(f"user{i}" for i in range(MAX_KEPT_ANSWERS + 50))})
    table, view = command_table(), cluster(members={"hoffman-lab": members})
    for i in range(MAX_KEPT_ANSWERS + 50):
        ask(table, view, "gpus", cluster_user="alice", user_id=f"U{i}")  # one key
        ask(table, view, f"free {'a40' if i % 2 else 'A40'}")
    assert len(kept(view)) == 3
    for i in range(MAX_KEPT_ANSWERS + 50):
        reply = ask(table, view, "gpus", cluster_user=f"user{i}")
        assert "*`hoffman-lab`*" in reply.text
    assert len(kept(view)) == MAX_KEPT_ANSWERS


def test_texts_read_once_are_bounded_and_forgotten_when_a_command_is_added() -> None:
    table = command_table()
    assert isinstance(table.read("gpu"), str)  # "Did you mean `/sky gpus`?"
    for i in range(MAX_TEXTS_KEPT + 10):
        table.read(f"jobs user{i}")
    assert len(table._read) <= MAX_TEXTS_KEPT
    long = "jobs " + "x" * MAX_TEXT_KEPT
    table.read(long)
    assert long not in table._read
    table.add(Command("gpu", "gpu", "one more", lambda request, view: Reply("gpu")))
    routed = table.read("gpu")
    assert not isinstance(routed, str) and routed.command.name == "gpu"


def test_the_same_words_read_the_same_on_every_ack() -> None:
    table, view = command_table(), cluster(jobs=[job(1, user="alice", gpus_by_type={"a40": 1})])
    texts = ["jobs", "gpus --here", "jobs alice --here", "free 'a40'", 'why "1', "nope"]
    first = [ask(table, view, text) for text in texts]
    assert [ask(table, view, text) for text in texts] == first
    assert first == [ask(fresh_table(), view, text) for text in texts]


async def test_a_kept_answer_names_its_cluster_and_is_kept_per_cluster() -> None:
    """Two clusters: each desk's view keeps its own answers; the note naming the cluster is
    added to a kept answer as to a fresh one."""
    desks = desks_of(two_clusters(), {"skynet": "a40", "nova": "h100"})
    table = command_table()

    async def ask_desks(table: CommandTable, text: str, now: float) -> Reply:
        request = CommandRequest(team_id="T", user_id="U", text=text, now=now)
        return await dispatch(table, request, desks.default.view(), desks=desks)

    for now in (1_000.0, 1_001.0, 1_500.0):
        for text in ("free", "free --cluster nova", "gpus kira-lab --here", "gpus hoffman-lab"):
            got = await ask_desks(table, text, now)
            assert got == await ask_desks(fresh_table(), text, now)
    assert "h100" in (await ask_desks(table, "free --cluster nova", 1_002.0)).text
    assert "On cluster `nova`." in (await ask_desks(table, "free --cluster nova", 1_002.0)).text
    assert "a40" in (await ask_desks(table, "free", 1_002.0)).text
    skynet, nova = (desk.view() for desk in desks.all())
    assert len(kept(skynet)) == 2 and len(kept(nova)) == 2


def as_answer_was(view: ClusterView, now: float, lines: list[str], also: tuple[str, ...]) -> Reply:
    """answer() as it was before answers were kept (the reference the stamp must match)."""
    warnings, age_line = freshness_lines(view, now, "slurm", also)
    blocks = [section(w) for w in warnings]
    body = lines_to_sections(lines)
    room = MAX_BLOCKS - len(blocks) - 1
    if len(body) > room:
        body = [*body[: room - 1], section("… (answer shortened)")]
    blocks += body
    blocks.append(context(age_line))
    return Reply("\n".join([*warnings, *lines, f"_{age_line}_"]), blocks)


@pytest.mark.parametrize("count", [0, 1, 3, 49, 200])
@pytest.mark.parametrize("errors", [{}, {"slurm": "Connection refused"}])
def test_answer_and_its_stamps_read_as_answer_did(count: int, errors: dict[str, str]) -> None:
    view = make_view(make_snapshot(TAKEN_AT, errors=errors, **_fields(cluster())))
    # Lines long enough that 49 of them need 49 sections, and 200 need more than fit.
    lines = [f"line {i} " + "x" * 2990 for i in range(count)]
    request = CommandRequest(team_id="T", user_id="U", now=NOW)
    first = answer(view, request, lines, "slurm", also=("caps",))
    assert first == as_answer_was(view, NOW, lines, ("caps",))
    assert first.fresh is not None
    for later in (NOW + 1, NOW + 500, NOW + 90_000):
        assert first.fresh.at(view, later) == as_answer_was(view, later, lines, ("caps",))


def test_acks_in_the_same_second_share_one_stamped_reply() -> None:
    table, view = command_table(), cluster()
    ask(table, view, "gpus hoffman-lab", now=NOW + 3.2)  # worked out and kept
    first = ask(table, view, "gpus hoffman-lab", now=NOW + 3.5)
    again = ask(table, view, "gpus hoffman-lab", now=NOW + 3.9)
    later = ask(table, view, "gpus hoffman-lab", now=NOW + 4.2)
    assert again == first and again.blocks is first.blocks  # stamped once, shared
    assert later is not first and later.text != first.text
    assert later == ask(fresh_table(), view, "gpus hoffman-lab", now=NOW + 4.2)


def _caps_read_long_before(seconds: float) -> ClusterView:
    """The cluster with Slurm read at TAKEN_AT and the caps `seconds` before it."""
    view = cluster()
    status = dict(view.snapshot.status)
    status["caps"] = replace(status["caps"], taken_at=TAKEN_AT - seconds)
    return make_view(replace(view.snapshot, status=status))


@pytest.mark.parametrize(
    ("view", "stale_at"),
    [(cluster(), 120.0), (_caps_read_long_before(1750.0), 50.0)],
    ids=["slurm", "caps"],
)
def test_a_source_turning_stale_within_a_second_is_warned_at_once(
    view: ClusterView, stale_at: float
) -> None:
    """The age words change once a second, a stale source's warning at any instant: a reply
    stamped at 120.0 s must not be handed out at 120.4 s (same words, now stale)."""
    table = command_table()
    warned = []
    for text in KEPT:
        for tenth in range(-15, 16):
            now = TAKEN_AT + stale_at + tenth / 10
            kept_now = ask(table, view, text, now=now)
            assert kept_now == ask(fresh_table(), view, text, now=now), (text, now)
            warned.append("⚠️" in kept_now.text)
    assert any(warned) and not all(warned)  # the walk crosses the threshold
