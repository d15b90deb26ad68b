"""Output paths filled in as Slurm fills them in, and tails turned into showable lines."""

from __future__ import annotations

from typing import Any

import pytest

from core.job_output import (
    expand_output_pattern,
    host_names,
    stderr_path,
    stdout_path,
    tail_text,
    with_host_names,
)
from core.records import Job, Node


def job(**fields: Any) -> Job:
    base: dict[str, Any] = {
        "job_id": 825,
        "name": "train",
        "user": "alice",
        "account": "hoffman-lab",
        "partition": "hoffman-lab",
        "state": "FAILED",
        "nodes": "clippy,baymax",
        "work_dir": "/srv/hoffman-lab/flash9/alice/vit",
    }
    return Job(**{**base, **fields})


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("/o/%x-%j.err", "/o/train-825.err"),
        ("/o/%u/%N-%j.out", "/o/alice/clippy-825.out"),
        ("/o/%A_%a.out", "/o/825_4294967294.out"),  # not an array task: Slurm's NO_VAL
        ("/o/%6j.out", "/o/000825.out"),  # a width zero-pads numbers
        ("/o/%3x.out", "/o/train.out"),  # ... and only numbers
        ("/o/100%%-%j.log", "/o/100%-825.log"),
        ("/o/\\%j-%x.out", "/o/%j-%x.out"),  # a backslash turns expansion off
        ("logs/%j.out", "/srv/hoffman-lab/flash9/alice/vit/logs/825.out"),
        # The batch script is step "batch", task 0 on node 0 (slurmd's _batch_path_check).
        ("/o/%s-%t-%n-%J.out", "/o/batch-0-0-825.out"),
        ("/o/%2n-%3t.out", "/o/00-000.out"),
        ("/o/%b-%r.out", "/o/%b-%r.out"),  # letters 22.05 does not know stay as given
    ],
)
def test_patterns_expand_as_slurm_expands_them(pattern: str, expected: str) -> None:
    assert expand_output_pattern(pattern, job()) == expected


def test_array_tasks_and_defaults() -> None:
    task = job(job_id=901, array_job_id=900, array_task="7", std_out="")
    assert stdout_path(task) == "/srv/hoffman-lab/flash9/alice/vit/slurm-900_7.out"
    assert expand_output_pattern("/o/%A-%a-%j.out", task) == "/o/900-7-901.out"
    # No --error: stderr shares the stdout file.
    assert stderr_path(task) == stdout_path(task)
    both = job(std_out="/o/%x-%j.out", std_err="/o/%x-%j.err")
    assert (stdout_path(both), stderr_path(both)) == ("/o/train-825.out", "/o/train-825.err")


def test_percent_n_is_the_batch_hosts_host_name_not_its_node_name() -> None:
    # Issue 26 item 8: with NodeName=clippy NodeHostname=vm, slurmd wrote `…-vm.out`.
    nodes = [Node("clippy", "MIXED", hostname="vm"), Node("baymax", "IDLE", hostname="baymax")]
    names = host_names(nodes)
    assert names == {"clippy": "vm"}
    running = job(nodes="clippy,baymax", output_host="clippy", std_out="/o/%x-%N.out")
    (resolved,) = with_host_names([running], names)
    assert stdout_path(resolved) == "/o/train-vm.out"
    # Before the poll resolved it (or without squeue's batch_host): the first node's name.
    assert stdout_path(job(nodes="gpu[07-09]", std_out="/o/%N.out")) == "/o/gpu07.out"
    (from_nodes,) = with_host_names([job(nodes="clippy", std_out="/o/%N.out")], names)
    assert stdout_path(from_nodes) == "/o/vm.out"


def test_unknown_node_leaves_the_pattern_visible() -> None:
    assert expand_output_pattern("/o/%N.out", job(nodes="")) == "/o/%N.out"


def test_tail_keeps_the_last_lines_and_drops_a_cut_first_line() -> None:
    data = b"ial line\nline 1\nline 2\nline 3\n\n"
    assert tail_text(data, from_start=False, max_lines=2, max_chars=1000) == "line 2\nline 3"
    assert tail_text(data, from_start=False, max_lines=10, max_chars=1000) == (
        "line 1\nline 2\nline 3"
    )
    assert tail_text(data, from_start=True, max_lines=10, max_chars=1000).startswith("ial line")


def test_tail_survives_binary_progress_bars_and_colour() -> None:
    data = b"\xff\xfeok\n\x1b[31mred\x1b[0m\nepoch 1: 10%\repoch 1: 50%\repoch 1: 100%\r\n"
    text = tail_text(data, from_start=True, max_lines=10, max_chars=1000)
    assert text == "\ufffd\ufffdok\nred\nepoch 1: 100%"


def test_tail_is_cut_to_its_last_characters() -> None:
    text = tail_text(b"x" * 50 + b"\n" + b"y" * 50, from_start=True, max_lines=5, max_chars=20)
    assert text == "…" + "y" * 19


def test_the_end_of_one_enormous_line_is_kept() -> None:
    # A sparse file's hole, then its last line: no newline in the whole chunk before it.
    data = b"\x00" * 8000 + b"last words\n"
    assert tail_text(data, from_start=False, max_lines=5, max_chars=100) == "last words"
