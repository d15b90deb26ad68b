"""The version a site installs grows with every commit, so `pip install --upgrade` of a newer
wheel replaces the code (every build was `0.1.0` before, and pip kept the old one). A build
that cannot count the commits (a shallow clone, an untagged git archive) refuses in one line:
it once built `0.1.0` and `0.0.0+unknown`, lower than the code it held (issue 42)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

import bot

if "SKYBOT_TESTCLUSTER" in os.environ:
    # The version is computed where wheels are built; the Slurm 24.11 sandbox has no build
    # tooling, and the wheel is the same for either Slurm.
    pytest.skip("inside the Slurm 24.11 sandbox: no build tooling", allow_module_level=True)

import versioningit  # after the skip: the sandbox does not have it
from versioningit.errors import Error as VersioningitError

REPO = Path(__file__).resolve().parent.parent
# What decides the version of a build: copied into scratch clones with pyproject.toml.
BUILD_SETTINGS = (
    "pyproject.toml",
    ".gitattributes",
    ".git_archival.txt",
    "deploy/pybuild/skybot_version.py",
    "deploy/pybuild/skybot_build.py",
)
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
    for name in BUILD_SETTINGS:
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / name).write_text((REPO / name).read_text())
    git("add", *BUILD_SETTINGS, cwd=clone)
    git("commit", "--quiet", "--allow-empty", "-m", "this tree's build settings", cwd=clone)
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


def version_or_refusal(project: Path) -> str:
    """The version versioningit computes for `project`, or its one-line refusal."""
    try:
        return versioningit.get_version(project)
    except VersioningitError as error:
        message = str(error)
        assert "\n" not in message.strip(), message
        assert message.startswith("skybot: refusing to build from "), message
        return "refused"


def shallow_and_archive(clone: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A `git clone --depth 1` and an unpacked `git archive` of the clone's HEAD."""
    shallow = tmp_path / "shallow"
    git("clone", "--quiet", "--depth", "1", clone.as_uri(), str(shallow), cwd=tmp_path)
    archive = tmp_path / "archive"
    archive.mkdir()
    tar = subprocess.run(
        ["git", "archive", "--format=tar", "HEAD"], cwd=clone, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as unpacked:
        unpacked.extractall(archive, filter="data")
    return shallow, archive


def test_a_shallow_clone_or_an_untagged_archive_refuses_rather_than_going_lower(
    history: Path, tmp_path: Path
) -> None:
    clone = scratch_clone(history, tmp_path)
    full = Version(versioningit.get_version(clone))
    shallow, archive = shallow_and_archive(clone, tmp_path)
    for build in (shallow, archive):
        got = version_or_refusal(build)
        assert got == "refused" or Version(got) == full, (build.name, got, full)
    assert version_or_refusal(shallow) == "refused"  # --depth 1 once said 0.1.0
    assert version_or_refusal(archive) == "refused"  # an archive once said 0.0.0+unknown


def test_an_archive_of_a_tagged_history_gets_the_full_clones_version(
    history: Path, tmp_path: Path
) -> None:
    clone = scratch_clone(history, tmp_path)
    git("tag", "v0.2.0", cwd=clone)
    git("commit", "--quiet", "--allow-empty", "-m", "after the release", cwd=clone)
    full = versioningit.get_version(clone)
    _, archive = shallow_and_archive(clone, tmp_path)
    assert version_or_refusal(archive) == full
    assert Version(full) > Version("0.2.0")


def test_a_tree_that_is_no_clone_archive_or_sdist_refuses(tmp_path: Path) -> None:
    for name in BUILD_SETTINGS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text((REPO / name).read_text())
    (tmp_path / ".git_archival.txt").unlink()
    assert version_or_refusal(tmp_path) == "refused"


def pip_wheel(source: Path, dist: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dist), "."],
        cwd=source, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.timeout(300)
def test_pip_wheel_of_a_shallow_clone_fails_with_the_one_line(
    history: Path, tmp_path: Path
) -> None:
    shallow, _ = shallow_and_archive(scratch_clone(history, tmp_path), tmp_path)
    result = pip_wheel(shallow, tmp_path / "dist")
    assert result.returncode != 0
    assert "[1 lines of output]\n      skybot: refusing to build from a shallow clone:" in (
        result.stdout + result.stderr
    ), result.stdout + result.stderr
    assert not list((tmp_path / "dist").glob("*.whl"))


@pytest.mark.timeout(300)
def test_a_second_wheel_does_not_ship_a_module_deleted_since_the_first(
    history: Path, tmp_path: Path
) -> None:
    """setuptools leaves its copy of the packages in build/; the next build took from it."""
    clone = scratch_clone(history, tmp_path)
    doomed = clone / "core" / "deleted_later.py"
    doomed.write_text("GONE = True\n")
    git("add", str(doomed), cwd=clone)
    git("commit", "--quiet", "-m", "a module", cwd=clone)
    first = pip_wheel(clone, tmp_path / "first")
    assert first.returncode == 0, first.stdout + first.stderr
    git("rm", "--quiet", str(doomed), cwd=clone)
    git("commit", "--quiet", "-m", "the module goes", cwd=clone)
    (clone / "build" / "lib" / "core").mkdir(parents=True, exist_ok=True)
    (clone / "build" / "lib" / "core" / "deleted_later.py").write_text("GONE = True\n")
    second = pip_wheel(clone, tmp_path / "second")
    assert second.returncode == 0, second.stdout + second.stderr
    (first_wheel,) = (tmp_path / "first").glob("*.whl")
    (wheel,) = (tmp_path / "second").glob("*.whl")
    assert "core/deleted_later.py" in zipfile.ZipFile(first_wheel).namelist()
    assert "core/deleted_later.py" not in zipfile.ZipFile(wheel).namelist()


def test_the_command_line_shows_the_package_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli", "--version"],
        cwd=REPO, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert result.stdout.strip() == f"skybot {bot.__version__}"
