"""Slurm's commands as small shell scripts in a `bin_dir` of their own: to run the real ones
as another user, to log each run, or to stand in for a slow or failing controller or for a
Slurm generation (`program`: a stand-in that logs its arguments to calls.log)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

COMMANDS = ("squeue", "sinfo", "scontrol", "sacct", "sacctmgr", "sdiag")


def write_wrappers(directory: Path, bodies: Mapping[str, str]) -> Path:
    """One executable `/bin/sh` script per command, `bodies[command]` its body; returns the
    directory, for `[slurm] bin_dir`."""
    directory.mkdir(parents=True, exist_ok=True)
    for command, body in bodies.items():
        script = directory / command
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
    return directory


def as_user(user: str, command: str) -> str:
    """A body that runs the real command as `user` (sdiag then counts its RPCs apart)."""
    return f'exec runuser -u {user} -- /usr/bin/{command} "$@"'


def program(bin_dir: Path, command: str, body: str) -> None:
    """A stand-in `command` that logs its arguments and runs `body` (sh)."""
    log = bin_dir / "calls.log"
    script = bin_dir / command
    script.write_text(f'#!/bin/sh\necho "{command} $*" >> {shlex.quote(str(log))}\n{body}\n')
    script.chmod(0o755)
