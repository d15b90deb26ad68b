"""Imports point down only: core <- store <- scheduler | handlers <- bot.

Read from the source with ast (nothing is imported), so an upward import fails here even in a
module no test happens to load. Imports under `if TYPE_CHECKING:` count too: a type that
needs an upward import is a seam in the wrong place.

Tests and benchmarks too: no test module imports another, and benchmarks import only
tests/support/ (what they share lives there).
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


def imported_modules(source: str, module: str) -> list[tuple[int, str, list[str]]]:
    """(line, dotted module, names taken from it) for every import in `source`, relative ones
    resolved against `module` (the importing module's own dotted name)."""
    package = module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            name = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            found.append((node.lineno, name or "", [alias.name for alias in node.names]))
    return found


def imports_of_test_modules(root: Path = ROOT) -> list[str]:
    """Each import, in tests/ or benchmarks/, of a test module (`tests.test_x`, `from tests
    import test_x`, `from .test_x import ...`), and each benchmark import from tests/ outside
    tests/support/."""
    problems = []
    for folder in ("tests", "benchmarks"):
        for path in sorted((root / folder).rglob("*.py")):
            relative = path.relative_to(root)
            dotted = ".".join(relative.with_suffix("").parts)
            for line, module, names in imported_modules(path.read_text(), dotted):
                parts = module.split(".")
                if (root / Path(*parts)).is_dir():  # `from tests import test_x`: x a module
                    parts += [name for name in names if name.startswith("test_")][:1]
                if any(part.startswith("test_") for part in parts):
                    problems.append(f"{relative}:{line} imports the test module {'.'.join(parts)}")
                elif folder == "benchmarks" and parts[0] == "tests" and parts[1:2] != ["support"]:
                    problems.append(f"{relative}:{line} imports {module}, not tests/support")
    return problems


def test_tests_and_benchmarks_import_no_test_module() -> None:
    """What several tests or a benchmark share lives in tests/support/: a test module can
    change or go without breaking another, and pytest never imports one as a library."""
    assert imports_of_test_modules() == []


@pytest.mark.parametrize(
    ("where", "source", "expected"),
    [
        ("tests/test_b.py", "from tests.test_a import helper", "tests.test_a"),
        ("tests/test_b.py", "import tests.test_a", "tests.test_a"),
        ("tests/test_b.py", "from tests import test_a", "tests.test_a"),
        ("tests/test_b.py", "from . import test_a", "tests.test_a"),
        ("tests/test_b.py", "from .test_a import helper", "tests.test_a"),
        ("tests/support/x.py", "from ..test_a import helper", "tests.test_a"),
        ("benchmarks/bench.py", "from tests.test_a import helper", "tests.test_a"),
    ],
)
def test_an_import_of_a_test_module_is_caught(
    tmp_path: Path, where: str, source: str, expected: str
) -> None:
    for folder in ("tests/support", "benchmarks"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "tests" / "test_a.py").write_text("def helper() -> None: ...\n")
    (tmp_path / where).write_text(f"{source}\n")
    fine = "from tests.support.x import helper\nfrom tests.support import x\nimport json\n"
    (tmp_path / "tests" / "test_c.py").write_text(fine)
    (tmp_path / "benchmarks" / "fine.py").write_text(fine)
    assert imports_of_test_modules(tmp_path) == [f"{where}:1 imports the test module {expected}"]


def test_a_benchmark_importing_tests_outside_support_is_caught(tmp_path: Path) -> None:
    for folder in ("tests/support", "benchmarks"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "benchmarks" / "bench.py").write_text("from tests.conftest import x\n")
    assert imports_of_test_modules(tmp_path) == [
        "benchmarks/bench.py:1 imports tests.conftest, not tests/support"
    ]
