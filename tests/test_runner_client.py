"""The bot's side of the runner contract without the runner: whatever sudo does (hangs,
prints nonsense, fails, or answers as a runner of another version), call_runner turns it into
an error reply. A script stands in for sudo, so this needs no cluster; the real runner
through real sudo is tests/test_runner.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bot import __version__
from bot.runner_client import call_runner


@pytest.mark.parametrize(
    ("fake_sudo", "says"),
    [
        ("sleep 30", "did not answer within 1 s"),
        ("echo hello", "unreadable answer"),
        ("echo '{\"job_id\": 1}'", "unreadable answer"),
        (
            "echo 'sudo: PAM account management error' >&2; exit 1",
            "The skybot runner failed for alice: sudo: PAM account management error",
        ),
        # A runner from before versions refuses the field; one of another version says so.
        (
            """echo '{"ok": false, "error": "The cancel request has unexpected field(s): """
            """bot_version."}'""",
            f"is version older than 0.1.0 but the bot is {__version__}. An admin must run "
            "`skybot install runner` as root.",
        ),
        (
            """echo '{"ok": false, "error": "no", "runner_version": "9.9.9"}'""",
            f"its runner (/usr/local/libexec/skybot-runner) is version 9.9.9 but the bot is "
            f"{__version__}",
        ),
    ],
)
async def test_client_turns_every_failure_into_an_error_reply(
    fake_sudo: str, says: str, tmp_path: Path
) -> None:
    sudo = tmp_path / "sudo"
    sudo.write_text(f"#!/bin/sh\n{fake_sudo}\n")
    sudo.chmod(0o755)
    started = time.monotonic()
    reply = await call_runner(
        "alice", {"action": "cancel", "job_id": "1"}, sudo=str(sudo), timeout=1
    )
    assert time.monotonic() - started < 10
    assert reply["ok"] is False
    assert says in reply["error"], reply
