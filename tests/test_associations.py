"""core.associations: lab GPU caps and members from `sacctmgr -P -n show assoc`."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.associations import parse_associations
from core.records import LabCap

V38 = Path(__file__).parent / "fixtures" / "slurm" / "v0.0.38"


def test_caps_members_and_warnings() -> None:
    text = (
        "root||\n"
        "root|root|\n"
        "hoffman-lab||gres/gpu=4\n"
        "hoffman-lab|alice|\n"
        "hoffman-lab|dave|gres/gpu=1\n"
        "kira-lab||cpu=10,gres/gpu=32\n"
        "kira-lab|bob|\n"
        "overcap||\n"
        "typed-lab||gres/gpu:a40=8\n"
        "garbage line without pipes\n"
        "\n"
    )
    caps, members, warnings = parse_associations(text)
    assert caps == [
        LabCap("hoffman-lab", 4),
        LabCap("kira-lab", 32),
        LabCap("overcap", None),
        LabCap("typed-lab", None),  # a typed limit caps one GPU type, not the lab
    ]
    # a user row's own limit (dave's gres/gpu=1) is not the lab's cap; root is not a lab
    assert members == {"hoffman-lab": {"alice", "dave"}, "kira-lab": {"bob"}}
    assert warnings == ["sacctmgr line 10 ignored: 'garbage line without pipes'"]


def test_trailing_delimiter_and_repeated_accounts() -> None:
    """`-p` ends lines with "|"; an account repeated (several clusters) gets one cap."""
    text = "kira-lab||cpu=10|\nkira-lab||gres/gpu=8|\nkira-lab||gres/gpu=2|\nkira-lab|bob|\n"
    caps, members, warnings = parse_associations(text)
    assert caps == [LabCap("kira-lab", 8)]  # the first row with a cap wins
    assert members == {"kira-lab": {"bob"}}
    assert warnings == []


@pytest.mark.parametrize(
    ("grptres", "cap"),
    [
        ("gres/gpu=4", 4),
        ("cpu=10,gres/gpu=4,mem=100G", 4),
        ("gres/gpu:a40=8,gres/gpu=2", 2),  # the untyped item, wherever it is
        ("gres/gpu:a40=8", None),
        ("gres/gpu=8M", None),
        ("gres/gpus=8", None),
        ("xgres/gpu=8", None),
        ("", None),
    ],
)
def test_only_an_untyped_gpu_limit_is_a_cap(grptres: str, cap: int | None) -> None:
    caps, _, _ = parse_associations(f"lab||{grptres}\n")
    assert caps == [LabCap("lab", cap)]


@pytest.mark.skipif(not (V38 / "sacctmgr_assoc.txt").exists(), reason="22.05 fixtures absent")
def test_recorded_2205_output() -> None:
    caps, members, warnings = parse_associations((V38 / "sacctmgr_assoc.txt").read_text())
    assert caps == [
        LabCap("hoffman-lab", 4),
        LabCap("kira-lab", 4),
        LabCap("overcap", None),
    ]
    assert members == {
        "hoffman-lab": {"alice", "bob"},
        "kira-lab": {"carol", "dave"},
        "overcap": {"alice", "bob", "carol", "dave"},
    }
    assert warnings == []


def test_a_gpu_limit_too_large_to_be_real_is_a_warning_not_a_cap() -> None:
    caps, _, warnings = parse_associations("big-lab||gres/gpu=99999999999999999999999\n")
    assert caps == [LabCap("big-lab", None)]
    assert any("out of range" in w for w in warnings)
