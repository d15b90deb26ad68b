"""Jobs of alice's whose files only she can read: a 0700 directory of hers on the test cluster
(the `private_dir` fixture: import it into the test module that uses it) and batch scripts
submitted into it, output and error beside them."""

from __future__ import annotations

import os
import pwd
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import sbatch

LAB = Path("/srv/hoffman-lab/flash9")


def owned(path: Path, user: str, mode: int) -> Path:
    pw = pwd.getpwnam(user)
    os.chown(path, pw.pw_uid, pw.pw_gid)
    path.chmod(mode)
    return path


@pytest.fixture
def private_dir() -> Iterator[Path]:
    """A directory of alice's that nobody else may enter (0700)."""
    path = LAB / "alice" / f"skybot-tails-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    owned(path, "alice", 0o700)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def job_script(directory: Path, name: str, body: str) -> Path:
    script = directory / f"{name}.sh"
    script.write_text(f"#!/bin/bash\nD={directory}\n{body}\n")
    return owned(script, "alice", 0o700)


def submit(directory: Path, name: str, body: str) -> int:
    return sbatch(
        "alice",
        "-p",
        "debug",
        "-A",
        "hoffman-lab",
        "--time=2",
        "-J",
        name,
        f"--chdir={directory}",
        "-o",
        f"{directory}/%x-%j.out",
        "-e",
        f"{directory}/%x-%j.err",
        str(job_script(directory, name, body)),
    )
