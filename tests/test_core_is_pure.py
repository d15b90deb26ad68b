"""core/ parses what it is given and does no I/O: no file, process, network or clock access.

Reading files is the pollers' (scheduler/), so a core function gives the same answer for the
same arguments and is tested without a disk, a cluster or a clock.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "core"
# Modules whose only use is I/O (or the wall clock, which makes a function impure).
IO_MODULES = {
    "os",
    "pathlib",
    "shutil",
    "subprocess",
    "socket",
    "tempfile",
    "glob",
    "fcntl",
    "time",
    "urllib",
    "http",
    "sqlite3",
    "sqlite_utils",
    "aiohttp",
    "slack_sdk",
    "slack_bolt",
}
# Calls that read or write files, or the clock, whatever module they come from.
IO_CALLS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "now", "today"}


def imported_modules(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def called_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif isinstance(func, ast.Attribute):
                names.add(func.attr)
    return names


# rglob: a package inside core/ (core/slurm_json/) is core too.
@pytest.mark.parametrize(
    "path", sorted(CORE.rglob("*.py")), ids=lambda p: p.relative_to(CORE).as_posix()
)
def test_core_module_does_no_io(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    assert imported_modules(tree) & IO_MODULES == set()
    assert called_names(tree) & IO_CALLS == set()
