"""One lock (deploy/requirements.lock): every dependency of skybot and of its tests pinned
with hashes, used by CI (deploy/dev-setup.sh), the wheel's test venvs (tests/support/wheels.py) and
the Debian package (debian/rules). Two installs a week apart were different programs: 33
dependencies, 4 without an upper bound, nothing pinned (issue 42)."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support.wheels import LOCK, LOCK_MARKER, REPO

ENTRY = re.compile(
    r"^([A-Za-z0-9_.-]+)==(\S+)((?:\s*;[^\\\n]*)?)[ \\]*\n((?:\s+--hash=\S+.*\n)+)", re.M
)


def pins(text: str) -> dict[str, Version]:
    return {canonicalize_name(m[0]): Version(m[1]) for m in ENTRY.findall(text)}


LOCKED = LOCK.read_text()
PRODUCT, _, TESTS = LOCKED.partition(LOCK_MARKER)
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_every_line_is_a_comment_or_a_pin_with_its_hashes() -> None:
    leftover = ENTRY.sub("", LOCKED)
    assert [line for line in leftover.splitlines() if not line.startswith("#")] == []
    assert LOCK_MARKER in LOCKED and len(pins(PRODUCT)) > 20 and len(pins(TESTS)) > 5


def test_the_lock_names_no_index() -> None:
    """Each machine installs from the index its own pip is configured with."""
    assert "://" not in LOCKED
    assert not re.search(r"^\s*--(index-url|extra-index-url|find-links|trusted-host)", LOCKED, re.M)


@pytest.mark.parametrize(
    ("requirements", "part"),
    [(PYPROJECT["dependencies"], "product"), (PYPROJECT["optional-dependencies"]["test"], "all")],
)
def test_each_requirement_is_pinned_within_its_range(requirements: list[str], part: str) -> None:
    locked = pins(PRODUCT if part == "product" else LOCKED)
    for line in requirements:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{name} is not in the lock's {part} part"
        assert requirement.specifier.contains(locked[name], prereleases=True), (line, locked[name])


def test_the_test_environment_is_the_locked_one() -> None:
    """What CI installed (deploy/dev-setup.sh) is what the lock says, for every locked package
    installed here."""
    differ = {}
    for name, version in pins(LOCKED).items():
        try:
            installed = Version(importlib.metadata.version(name))
        except importlib.metadata.PackageNotFoundError:
            continue  # for another platform or Python (e.g. colorama on Windows)
        if installed != version:
            differ[name] = f"{installed} installed, {version} locked"
    assert not differ, f"{differ}: run deploy/dev-setup.sh (or pip install -r the lock)"


@pytest.mark.parametrize("user", ["deploy/dev-setup.sh", "tests/support/wheels.py", "debian/rules"])
def test_ci_the_test_venvs_and_the_package_install_from_the_lock(user: str) -> None:
    text = (REPO / user).read_text()
    assert "requirements.lock" in text or "runtime_lock" in text, user
    assert "--require-hashes" in text or "runtime_lock" in text or "dh_virtualenv" in text
