"""A real tmpfs for a test's storage: mounted for the test, lazily unmounted after."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def mounted_tmpfs(target: Path, size: str, options: str = "") -> Iterator[Path]:
    """Mount a `size` tmpfs at `target` (created if needed), with further mount `options`
    ("ro"); needs root, as the README's set-up has. Fails the test, rather than skipping it,
    when mounting is not allowed."""
    target.mkdir(parents=True, exist_ok=True)
    extra = f",{options}" if options else ""
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755{extra}", "tmpfs", str(target)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (run the tests as root): {result.stderr.strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], check=True)
