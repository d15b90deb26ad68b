"""An option given twice is refused, naming it, instead of silently keeping the last value.

Issue 13 item 10: `--partition overcap --partition hoffman-lab` submitted to hoffman-lab. The
runner refuses a request that names a field twice too (tests/test_runner.py,
test_deep_large_and_ambiguous_requests_get_the_normal_refusal).
"""

from __future__ import annotations

import pytest

from handlers.commands import command_table
from handlers.commands.submit import parse_submit_args
from handlers.router import UsageError
from tests.support.asking import answer_from_view
from tests.support.sample_cluster import NOW, cluster


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ("--partition overcap --partition hoffman-lab", "`--partition` is given twice: give it"),
        ("--partition=overcap --partition=hoffman-lab", "`--partition` is given twice"),
        ("-p overcap --partition hoffman-lab", "(`-p` and `--partition` are the same option)"),
        ("--time 10 -t 20", "`-t` is given twice (`--time` and `-t` are the same option)"),
        ("--job-name a -J b", "`-J` is given twice"),
        ("--gpus a40:1 --gpus a40:2", "`--gpus` is given twice"),
    ],
)
def test_submit_refuses_an_option_given_twice(args: str, says: str) -> None:
    with pytest.raises(UsageError) as refusal:
        parse_submit_args(("job.sh", *args.split()))
    assert says in str(refusal.value)


def test_submit_takes_each_option_once() -> None:
    script, options = parse_submit_args(
        ("job.sh", "-p", "overcap", "--time=10", "-A", "overcap", "--job-name", "x")
    )
    assert (script, options) == (
        "job.sh",
        {"partition": "overcap", "time": "10", "account": "overcap", "job_name": "x"},
    )


@pytest.mark.parametrize(
    "text",
    [
        "template --gpus 1 --gpus 2",
        "template --lab hoffman-lab --lab=kira-lab",
        "images torch --gpu a100 --gpu=a10",
    ],
)
def test_other_commands_refuse_an_option_given_twice(text: str) -> None:
    reply = answer_from_view(
        command_table(), cluster(), text, team_id="T1", user_id="U1", cluster_user="alice", now=NOW
    )
    assert "twice" in reply.text or "only once" in reply.text
    assert "--gpu" in reply.text or "--lab" in reply.text
