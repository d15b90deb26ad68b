"""Compiled bytecode for the test run, kept outside the tree.

A test run starts about a hundred Python processes: pytest-xdist's workers, `skybot run`,
`skybot doctor`, poll workers. With PYTHONDONTWRITEBYTECODE set (as this environment sets it,
to keep `__pycache__` out of checkouts) each of them compiled skybot's ~180 modules again,
about 0.2 s a process, and each worker rewrote and compiled every test module again, about
4.5 s. Under a cache prefix in the user's cache directory nothing is written into the tree,
and each module is compiled once per change instead of once per process.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def cache_directory() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "skybot-tests" / "pycache"


def cache_bytecode_outside_the_tree() -> None:
    """For this process and every process it starts. A prefix the user chose is kept."""
    prefix = os.environ.get("PYTHONPYCACHEPREFIX") or str(cache_directory())
    try:
        Path(prefix).mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        return  # no cache then: slower, not wrong
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False
