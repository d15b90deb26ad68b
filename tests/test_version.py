"""The version a site installs grows with every commit, so `pip install --upgrade` of a newer
wheel replaces the code (every build was `0.1.0` before, and pip kept the old one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

import bot

if "SKYBOT_TESTCLUSTER" in os.environ:
    # The version is computed where wheels are built; the Slurm 24.11 sandbox has no build
    # tooling, and the wheel is the same for either Slurm.
    pytest.skip("inside the Slurm 24.11 sandbox: no build tooling", allow_module_level=True)

import versioningit  # after the skip: the sandbox does not have it

REPO = Path(__file__).resolve().parent.parent
# What every wheel built before the version came from git carried.
LAST_FIXED_VERSION = Version("0.1.0")


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", *args],
        cwd=cwd, capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This repository's history, copied once (about 1 s): each test clones the copy cheaply."""
    copy = tmp_path_factory.mktemp("history") / "repo"
    git("clone", "--quiet", "--no-local", str(REPO), str(copy), cwd=copy.parent)
    return copy


def scratch_clone(history: Path, tmp_path: Path) -> Path:
    """A clone of this repository's history whose newest commit has this tree's pyproject."""
    clone = tmp_path / "clone"
    git("clone", "--quiet", "--shared", str(history), str(clone), cwd=tmp_path)
    (clone / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    git("commit", "--quiet", "--allow-empty", "-am", "this tree's build settings", cwd=clone)
    return clone


def test_each_commit_on_main_builds_a_newer_version(history: Path, tmp_path: Path) -> None:
    clone = scratch_clone(history, tmp_path)
    before = Version(versioningit.get_version(clone))
    git("commit", "--quiet", "--allow-empty", "-m", "one more", cwd=clone)
    after = Version(versioningit.get_version(clone))
    assert LAST_FIXED_VERSION < before < after, (before, after)
    assert after.local == f"g{git('rev-parse', '--short', 'HEAD', cwd=clone).strip()}"


def test_a_tag_starts_the_count_again_above_it(history: Path, tmp_path: Path) -> None:
    clone = scratch_clone(history, tmp_path)
    git("tag", "v0.2.0", cwd=clone)
    assert versioningit.get_version(clone) == "0.2.0"
    git("commit", "--quiet", "--allow-empty", "-m", "after the release", cwd=clone)
    assert Version(versioningit.get_version(clone)) > Version("0.2.0")


def test_a_tree_without_git_says_its_version_is_unknown(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    assert versioningit.get_version(tmp_path) == "0.0.0+unknown"


def test_the_command_line_shows_the_package_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli", "--version"],
        cwd=REPO, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert result.stdout.strip() == f"skybot {bot.__version__}"
