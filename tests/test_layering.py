"""Imports point down only: core <- store <- scheduler | handlers <- bot.

Read from the source with ast (nothing is imported), so an upward import fails here even in a
module no test happens to load. Imports under `if TYPE_CHECKING:` count too: a type that
needs an upward import is a seam in the wrong place.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PACKAGES = ("core", "store", "scheduler", "handlers", "bot")
# What each package may import of skybot besides itself.
ALLOWED: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "store": frozenset({"core"}),
    "scheduler": frozenset({"core", "store"}),
    "handlers": frozenset({"core", "store"}),
    "bot": frozenset({"core", "store", "scheduler", "handlers"}),
}


def skybot_imports(source: str, package: str) -> set[tuple[int, str]]:
    """(line, top-level skybot package) for every import in `source`, relative ones resolved."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [package] if node.level else [node.module or ""]
        else:
            continue
        found |= {(node.lineno, n.split(".")[0]) for n in names if n.split(".")[0] in PACKAGES}
    return found


def violations(root: Path = ROOT) -> list[str]:
    problems = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "install_files" in path.parts:
                continue  # the runner is a stand-alone script, shipped as data
            for line, target in sorted(skybot_imports(path.read_text(), package)):
                if target != package and target not in ALLOWED[package]:
                    problems.append(f"{path.relative_to(root)}:{line} imports {target}")
    return problems


def test_imports_point_down_only() -> None:
    assert violations() == []


@pytest.mark.parametrize(
    ("package", "source", "expected"),
    [
        ("core", "from store.db import open_db", "core/bad.py:1 imports store"),
        ("core", "import bot.config", "core/bad.py:1 imports bot"),
        ("store", "from scheduler.backoff import Backoff", "store/bad.py:1 imports scheduler"),
        ("scheduler", "from handlers.router import Command", "scheduler/bad.py:1 imports handlers"),
        ("handlers", "import scheduler.submit_worker", "handlers/bad.py:1 imports scheduler"),
        ("handlers", "from bot.config import Config", "handlers/bad.py:1 imports bot"),
        (
            "scheduler",
            "if TYPE_CHECKING:\n    from bot import runner_client",
            "scheduler/bad.py:2 imports bot",
        ),
    ],
)
def test_an_upward_import_is_caught(
    tmp_path: Path, package: str, source: str, expected: str
) -> None:
    for name in PACKAGES:
        (tmp_path / name).mkdir()
    (tmp_path / package / "bad.py").write_text(f"{source}\n")
    (tmp_path / package / "fine.py").write_text("import json\nfrom core import records\n")
    assert violations(tmp_path) == [expected]


def core_import_cycles(root: Path = ROOT) -> list[list[str]]:
    """Cycles among core's own parts (imports anywhere in a module, `if TYPE_CHECKING:` too),
    a sub-package (core/buttons) counting as one part: inside core, imports point down as
    well, so a building block never reaches back up into a composer that uses it (as
    core/buttons once imported core/job_notices.py, which imports core/log_more.py, which
    imports core/buttons)."""

    def part(dotted: str) -> str:
        return ".".join(dotted.split(".")[:2])

    parts = {
        part(".".join(path.relative_to(root).with_suffix("").parts)): path
        for path in (root / "core").rglob("*.py")
    }
    graph: dict[str, set[str]] = {name: set() for name in parts}
    for path in (root / "core").rglob("*.py"):
        module = part(".".join(path.relative_to(root).with_suffix("").parts))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            graph[module] |= {part(n) for n in names if part(n) in parts} - {module}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return cycles


def test_imports_point_down_inside_core_too() -> None:
    assert core_import_cycles() == []


def test_a_cycle_inside_core_is_caught(tmp_path: Path) -> None:
    (tmp_path / "core" / "buttons").mkdir(parents=True)
    (tmp_path / "core" / "buttons" / "__init__.py").write_text("")
    (tmp_path / "core" / "buttons" / "cancel.py").write_text("from core.notices import label\n")
    (tmp_path / "core" / "notices.py").write_text("from core.buttons import cancel\n")
    assert core_import_cycles(tmp_path) == [["core.buttons", "core.notices", "core.buttons"]]
