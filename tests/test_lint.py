import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def run_tool(*argv: str) -> subprocess.CompletedProcess[str]:
    """A lint tool from this interpreter's environment, where the test extras put it."""
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=REPO, capture_output=True, text=True, timeout=300
    )


def test_ruff_is_clean() -> None:
    result = run_tool("ruff", "check", "--no-cache", str(REPO))
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = run_tool("ruff", "format", "--check", "--no-cache", str(REPO))
    assert result.returncode == 0, result.stdout + result.stderr


# A fresh checkout has no .mypy_cache: the first run analyses the libraries' stubs too.
@pytest.mark.timeout(300)
def test_mypy_is_clean() -> None:
    """Over the packages pyproject's [tool.mypy] names, with its strictness."""
    result = run_tool("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def _pinned() -> dict[str, str]:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    test_extra = pyproject["project"]["optional-dependencies"]["test"]
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", "\n".join(test_extra), re.MULTILINE))


@pytest.mark.parametrize("tool", ["ruff", "mypy"])
def test_lint_tools_are_the_pinned_versions(tool: str) -> None:
    """Another version finds other things: what passes here must pass in CI."""
    pins = _pinned()
    assert tool in pins, f"{tool} is not pinned (==) in pyproject's test extra"
    installed = importlib.metadata.version(tool)
    assert installed == pins[tool], (
        f"{tool} {installed} is installed, pyproject pins {pins[tool]}: "
        'run `python3 -m pip install -e ".[test]"`'
    )
