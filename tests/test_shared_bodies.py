"""Answer bodies are packed into sections once per snapshot, and only so many of them."""

from __future__ import annotations

from handlers.commands.common import (
    _COUNTS_SHOWN,
    MAX_COUNTS_SHOWN,
    MAX_SHARED_BODIES,
    answer,
    format_counts,
)
from handlers.reply import lines_to_sections
from handlers.request import CommandRequest
from tests.support.sample_cluster import NOW, cluster


def _request() -> CommandRequest:
    return CommandRequest(team_id="T1", user_id="U1", now=NOW)


def test_the_same_body_is_packed_once_per_snapshot_and_answers_alike() -> None:
    view = cluster()
    lines = ["*`hoffman-lab`*: 3 of 8 GPUs", "alice 2, bob 1"]
    first = answer(view, _request(), lines, "slurm")
    second = answer(view, _request(), list(lines), "slurm")
    assert first == second
    assert first.blocks[: len(lines_to_sections(lines))] == lines_to_sections(lines)
    # Another snapshot packs its own.
    assert answer(cluster(), _request(), lines, "slurm") == first


def test_bodies_that_differ_every_time_do_not_grow_the_snapshots_memo() -> None:
    view = cluster()
    for i in range(3 * MAX_SHARED_BODIES):
        reply = answer(view, _request(), [f"job running for {i} s"], "slurm")
        assert f"job running for {i} s" in reply.text
        assert f"job running for {i} s" in reply.blocks[0]["text"]["text"]
    assert len(view.memo("shared bodies", dict)) == MAX_SHARED_BODIES


def test_count_lists_are_shown_alike_from_the_cache_and_it_stays_bounded() -> None:
    assert format_counts({"a40": 3, "": 1}) == "`a40` 3, `gpu` 1"
    assert format_counts({"a40": 3, "": 1}) == "`a40` 3, `gpu` 1"
    assert format_counts({"": 1, "a40": 3}) == "`gpu` 1, `a40` 3"  # the caller's order
    for i in range(3 * MAX_COUNTS_SHOWN):
        assert format_counts({f"user{i}": i}) == f"`user{i}` {i}"
    assert len(_COUNTS_SHOWN) <= MAX_COUNTS_SHOWN
