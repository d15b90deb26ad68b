"""skybot-runner's `tail`: the end of a user's own job output, read as that user.

Real sudo, real users, requests made as the `skybot` service user exactly as the bot makes them
(tests/support/installed_runner.py installs the runner from this checkout). Every refusal is
checked for what it must not do too: no byte of the file it refused comes back.
"""

from __future__ import annotations

import base64
import os
import pwd
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.installed_runner import (
    AS_SKYBOT,
    alice_dir,
    ask,
    bob_dir,
    installed_runner,
    make_dir,
    put,
    token,
)

# The runner tests' fixtures: the runner installed from this checkout (autouse), and fresh
# directories of alice's and bob's under their lab storage.
__all__ = ["alice_dir", "bob_dir", "installed_runner", "token"]

pytestmark = pytest.mark.cluster


def tail(path: Path | str, **limits: Any) -> dict[str, Any]:
    return {"action": "tail", "path": str(path), **limits}


def data_of(reply: dict[str, Any]) -> bytes:
    assert reply["ok"] is True, reply
    return base64.b64decode(reply["data"])


async def test_reads_the_last_lines_of_the_owners_file(alice_dir: Path) -> None:
    lines = b"".join(b"line %d\n" % i for i in range(1, 101))
    out = put(alice_dir / "train-825.err", lines, "alice", mode=0o600)
    reply = await ask("alice", tail(out, max_lines=3, max_bytes=4096))
    assert data_of(reply) == b"\nline 98\nline 99\nline 100\n"
    assert reply["size"] == len(lines)
    assert reply["start"] == len(lines) - len(b"\nline 98\nline 99\nline 100\n")
    # A short file comes whole, from offset 0.
    short = await ask("alice", tail(out, max_lines=500, max_bytes=65536))
    assert (data_of(short), short["start"]) == (lines, 0)
    # "Show more": the chunk that ends where the last one started.
    more = await ask("alice", tail(out, max_lines=2, max_bytes=4096, end=reply["start"]))
    assert data_of(more) == b"\nline 96\nline 97"


async def test_binary_output_comes_back_byte_for_byte(alice_dir: Path) -> None:
    raw = bytes(range(256)) + b"\r\n\x00\xff tail\n"
    out = put(alice_dir / "bin.out", raw, "alice")
    assert data_of(await ask("alice", tail(out, max_lines=1000, max_bytes=65536))) == raw


async def test_a_file_the_bot_cannot_read_is_read_as_its_owner(alice_dir: Path) -> None:
    private = make_dir(alice_dir / "private", "alice", mode=0o700)
    out = put(private / "job.err", b"Traceback: secret key missing\n", "alice", mode=0o600)
    as_bot = subprocess.run([*AS_SKYBOT, "cat", str(out)], capture_output=True, check=False)
    assert as_bot.returncode != 0 and b"secret" not in as_bot.stdout
    assert b"secret key missing" in data_of(await ask("alice", tail(out)))


async def test_an_enormous_sparse_file_is_read_from_its_end_only(alice_dir: Path) -> None:
    out = alice_dir / "huge.out"
    with open(out, "wb") as f:
        f.truncate(1024**3)
        f.write(b"start of the file\n")
        f.seek(1024**3 - 10)
        f.write(b"last line\n")
    os.chown(out, pwd.getpwnam("alice").pw_uid, -1)
    assert os.stat(out).st_blocks * 512 < 1024**2  # sparse: nothing between the ends
    reply = await ask("alice", tail(out, max_lines=5, max_bytes=8192))
    data = data_of(reply)
    # Zeros (no newline) up to the last line: one cut line, at most max_bytes of it.
    assert data.endswith(b"\x00last line\n") and len(data) == 8192
    assert reply["size"] == 1024**3 and reply["start"] >= 1024**3 - 8192
    assert b"start of the file" not in data


async def refused(user: str, request: dict[str, Any], *fragments: str) -> str:
    reply = await ask(user, request)
    assert reply["ok"] is False, reply
    assert "data" not in reply
    for fragment in fragments:
        assert fragment in reply["error"], reply["error"]
    return str(reply["error"])


async def test_a_fifo_is_refused_without_waiting_for_a_writer(alice_dir: Path) -> None:
    fifo = alice_dir / "job.err"
    os.mkfifo(fifo)
    os.chown(fifo, pwd.getpwnam("alice").pw_uid, -1)
    started = time.monotonic()
    await refused("alice", tail(fifo), "FIFO")
    assert time.monotonic() - started < 10  # it did not block on open (the alarm is 10 s)


async def test_a_symlink_to_another_users_file_leaks_nothing(
    alice_dir: Path, bob_dir: Path
) -> None:
    secret = put(bob_dir / "bob.err", b"BOB-SECRET-TOKEN\n", "bob", mode=0o644)
    link = alice_dir / "job.err"
    link.symlink_to(secret)
    os.lchown(link, pwd.getpwnam("alice").pw_uid, -1)
    error = await refused("alice", tail(link), "symbolic link")
    assert "BOB-SECRET" not in error
    # bob's world-readable file named directly, or through a symlinked directory: not hers.
    await refused("alice", tail(secret), "not owned by alice")
    (alice_dir / "bobs").symlink_to(bob_dir)
    await refused("alice", tail(alice_dir / "bobs" / "bob.err"), "not owned by alice")
    # A hard link alice made to it is still bob's file.
    os.link(secret, alice_dir / "hard.err")
    await refused("alice", tail(alice_dir / "hard.err"), "not owned by alice")
    # And the runner as alice cannot read what alice cannot read.
    secret.chmod(0o600)
    await refused("alice", tail(secret), "may not read")


async def test_missing_files_directories_and_devices_are_refused(alice_dir: Path) -> None:
    await refused("alice", tail(alice_dir / "nope.err"), "does not exist")
    await refused("alice", tail(alice_dir), "not a regular file")
    await refused("alice", tail("/dev/zero"), "not a regular file")


@pytest.mark.parametrize(
    ("request_fields", "fragment"),
    [
        ({"path": "relative/job.err"}, "absolute path"),
        ({"path": "/tmp/a\nb"}, "newline"),
        ({"path": 7}, "absolute path"),
        ({"path": "/tmp/x", "max_bytes": 10**9}, "'max_bytes' must be"),
        ({"path": "/tmp/x", "max_lines": 0}, "'max_lines' must be"),
        ({"path": "/tmp/x", "end": -1}, "'end' must be"),
        ({"path": "/tmp/x", "follow": True}, "unexpected field(s): follow"),
    ],
)
async def test_bad_tail_requests_are_refused(request_fields: dict[str, Any], fragment: str) -> None:
    await refused("alice", {"action": "tail", **request_fields}, fragment)
