"""Runner replies are decoded once (core/runner_replies.py): each action's fields or `Refused`.

The wire format is the runner's (bot/install_files/skybot_runner.py) and does not change: the
replies the runner builds are read from its source here, and each decoder's required fields
must be in one of them, so a field renamed on one side only fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import msgspec
import pytest

from core.runner_replies import (
    NO_REASON,
    UNREADABLE,
    Cancelled,
    Linked,
    Moved,
    NeverSubmitted,
    Refused,
    StillSubmitting,
    SubmitFailed,
    Submitted,
    Tail,
    Version,
    decode_cancel,
    decode_link,
    decode_move,
    decode_submit,
    decode_submit_status,
    decode_tail,
    decode_version,
)

RUNNER_FILE = Path(__file__).parent.parent / "bot" / "install_files" / "skybot_runner.py"


def runner_ok_replies() -> list[set[str]]:
    """The keys of every {"ok": True, ...} the runner's source builds."""
    found = []
    for node in ast.walk(ast.parse(RUNNER_FILE.read_text())):
        if not isinstance(node, ast.Dict):
            continue
        keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
        ok = dict(zip(node.keys, node.values, strict=True))
        if any(
            isinstance(k, ast.Constant) and k.value == "ok" and getattr(v, "value", None) is True
            for k, v in ok.items()
        ):
            found.append({str(k) for k in keys})
    return found


def required(shape: type[msgspec.Struct]) -> set[str]:
    return {f.name for f in msgspec.structs.fields(shape) if f.required}


@pytest.mark.parametrize(
    "shape", [Version, Submitted, Cancelled, Linked, Tail, Moved, SubmitFailed]
)
def test_each_decoder_wants_only_fields_the_runner_sends(shape: type[msgspec.Struct]) -> None:
    replies = runner_ok_replies()
    assert any(required(shape) <= keys for keys in replies), (shape, replies)


@pytest.mark.parametrize(
    ("decode", "wire", "decoded"),
    [
        (decode_version, {"ok": True, "version": "1.2"}, Version("1.2")),
        (
            decode_submit,
            {"ok": True, "job_id": 12, "cluster": "skynet", "script": "/h/a.sh", "warning": "w"},
            Submitted(12, "skynet", "/h/a.sh"),
        ),
        (decode_cancel, {"ok": True, "job_id": "12_3"}, Cancelled("12_3")),
        (decode_link, {"ok": True, "user": "alice"}, Linked("alice")),
        (decode_tail, {"ok": True, "data": "aGk=", "start": 3, "size": 5}, Tail(b"hi", 3, 5)),
        (
            decode_move,
            {"ok": True, "job_id": "7", "partition": "overcap", "account": None},
            Moved("7", "overcap", None),
        ),
        (decode_submit_status, {"ok": True, "state": "running"}, StillSubmitting()),
        (decode_submit_status, {"ok": True, "state": "absent"}, NeverSubmitted()),
        (decode_submit_status, {"ok": True, "state": "failed", "error": "no"}, SubmitFailed("no")),
        (
            decode_submit_status,
            {"ok": True, "state": "submitted", "job_id": 4, "cluster": None},
            Submitted(4, None),
        ),
    ],
)
def test_each_reply_decodes_to_its_actions_type(decode: Any, wire: Any, decoded: Any) -> None:
    assert decode(wire) == decoded


@pytest.mark.parametrize(
    "decode",
    [decode_version, decode_submit, decode_cancel, decode_link, decode_tail, decode_move,
     decode_submit_status],
)  # fmt: skip
def test_refusals_have_one_wording_per_kind(decode: Any) -> None:
    said = decode({"ok": False, "error": "Invalid job id specified"})
    assert said == Refused("Invalid job id specified")
    assert decode({"ok": False}) == Refused(NO_REASON)
    assert decode({"ok": False, "error": "  "}) == Refused(NO_REASON)
    unknown = decode({"ok": False, "error": "killed", "outcome_unknown": True})
    assert unknown.outcome_unknown and unknown.reason == "killed"
    # "ok" without the action's fields, or with fields of the wrong type.
    assert decode({"ok": True}) == Refused(UNREADABLE, "unreadable")
    assert decode({"ok": True, "job_id": True, "version": 3, "user": 1, "state": "x"}) == (
        Refused(UNREADABLE, "unreadable")
    )
    assert decode({"ok": "yes"}) == Refused(NO_REASON)


def test_a_tail_that_is_not_base64_or_not_within_its_file_is_unreadable() -> None:
    assert decode_tail({"ok": True, "data": "@@", "start": 0, "size": 2}) == Refused(
        UNREADABLE, "unreadable"
    )
    assert decode_tail({"ok": True, "data": "", "start": 9, "size": 2}) == Refused(
        UNREADABLE, "unreadable"
    )


def test_a_link_refusal_carries_the_commands_that_fix_it() -> None:
    wire = {"ok": False, "error": "others can write", "fix": ["chmod 700 ~/.config"]}
    assert decode_link(wire) == Refused("others can write", fix=("chmod 700 ~/.config",))
    assert decode_link({"ok": False, "error": "x", "fix": [1]}).fix == ()
