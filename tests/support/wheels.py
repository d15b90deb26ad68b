"""The wheels and fresh venvs that the install and upgrade tests need, built in the background
from the start of a session.

Building a wheel and installing it with its dependencies takes most of a minute of pip and
none of Slurm, yet both tests are cluster tests, on CI's longest path: `conftest.py` starts
the builds once it has collected them (`start_for`), and each test waits for what it needs.
One build at a time, on one thread, so the cluster tests running meanwhile keep a core.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"
# Every pinned dependency with its hashes; the product's part ends at the marker line.
LOCK = REPO / "deploy" / "requirements.lock"
LOCK_MARKER = "# ---- below: the test extra's own packages"
# The checkout minus what is never part of a build. Git stays: the version comes from it.
NOT_SOURCE = shutil.ignore_patterns(
    "build", "dist", "*.egg-info", "__pycache__", ".*cache", ".benchmarks", ".venv", "_version.py"
)
# Which test files need which builds, in the order they are started.
NEEDS = {
    "tests/test_wheel_install.py": ("checkout wheel", "checkout venv"),
    "tests/test_upgrade_cluster.py": ("checkout wheel", "previous release venv"),
    "tests/test_debian_package_cluster.py": ("debian package",),
}

_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="wheel-build")
_builds: dict[str, Future[Path]] = {}
_folder: list[Path] = []


def run(argv: Sequence[str], cwd: Path, timeout: float = 900) -> str:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{list(argv)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def checkout_wheel() -> Path:
    """The wheel built from a copy of this checkout (so a stale `build/` in the checkout
    cannot smuggle files into it)."""
    return _wait("checkout wheel")


def checkout_venv() -> Path:
    """A fresh venv of the system python3 with the checkout's wheel and its dependencies
    installed from the index at the versions (and hashes) of deploy/requirements.lock."""
    return _wait("checkout venv")


def previous_release_venv() -> Path:
    """A fresh venv with the previous release installed (0.1.0, see `previous_release`)."""
    return _wait("previous release venv")


def previous_release() -> str:
    """The last commit whose builds all said 0.1.0: the parent of the one that made the
    version come from git."""
    first = run(
        ["git", "log", "--format=%H", "--reverse", "-S", "versioningit", "--", "pyproject.toml"],
        REPO,
    ).split()
    assert first, "this clone's history does not reach the versioningit change (a shallow clone?)"
    return f"{first[0]}^"


def debian_package() -> Path:
    """skybot_VERSION_ARCH.deb built from this checkout by deploy/build-deb.sh (about 1.5 min
    of pip and dpkg)."""
    return _wait("debian package")


def start_for(items: Sequence[pytest.Item]) -> None:
    """Start every build the selected tests will need."""
    wanted = {path for item in items for path in NEEDS if item.nodeid.startswith(path)}
    for path in sorted(wanted):
        for name in NEEDS[path]:
            _start(name)


def clean_up() -> None:
    _pool.shutdown(wait=True, cancel_futures=True)
    for folder in _folder:
        shutil.rmtree(folder, ignore_errors=True)


def _wait(name: str) -> Path:
    return _start(name).result()


def _start(name: str) -> Future[Path]:
    if name not in _builds:
        for needed in DEPENDS.get(name, ()):
            _start(needed)  # first: the one build thread takes them in order
        _builds[name] = _pool.submit(BUILDS[name])
    return _builds[name]


def _base() -> Path:
    if not _folder:
        _folder.append(Path(tempfile.mkdtemp(prefix="skybot-wheels-")))
    return _folder[0]


def _build_wheel(source: Path, dist: Path) -> Path:
    run(["python3", "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), "."], source)
    (wheel,) = dist.glob("skybot-*.whl")
    return wheel


def runtime_lock(destination: Path) -> Path:
    """The product's part of deploy/requirements.lock (above its marker line), as a file."""
    text = LOCK.read_text()
    product, marker, _ = text.partition(LOCK_MARKER)
    assert marker, f"{LOCK} has no line {LOCK_MARKER!r}"
    destination.write_text(product)
    return destination


def _venv_with(wheel: Path, name: str, locked: bool = True) -> Path:
    """A venv of the system python3 with `wheel` installed: its dependencies from the lock
    (as the Debian package has them), or, for a release older than the lock, from the index."""
    venv = _base() / name
    pip = str(venv / "bin" / "pip")
    run([SYSTEM_PYTHON, "-m", "venv", str(venv)], _base())
    if locked:
        pins = runtime_lock(_base() / f"{name}-lock.txt")
        run([pip, "install", "--quiet", "--require-hashes", "--no-deps", "-r", str(pins)], _base())
        run([pip, "install", "--quiet", "--no-deps", str(wheel)], _base())
    else:
        run([pip, "install", "--quiet", str(wheel)], _base())
    return venv


def _build_checkout_wheel() -> Path:
    source = _base() / "checkout-source"
    shutil.copytree(REPO, source, ignore=NOT_SOURCE)
    return _build_wheel(source, _base() / "checkout-dist")


def _build_checkout_venv() -> Path:
    return _venv_with(_builds["checkout wheel"].result(), "checkout-venv")


def _build_previous_release_venv() -> Path:
    """From git's own copy of the previous release: no checkout of this tree is touched."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", previous_release()],
        cwd=REPO, capture_output=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    source = _base() / "previous-source"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(source, filter="data")
    wheel = _build_wheel(source, _base() / "previous-dist")
    return _venv_with(wheel, "previous-venv", locked=False)


def _build_debian_package() -> Path:
    built = run([str(REPO / "deploy" / "build-deb.sh"), str(_base() / "deb")], REPO)
    return Path(built.strip().splitlines()[-1])


BUILDS: dict[str, Callable[[], Path]] = {
    "checkout wheel": _build_checkout_wheel,
    "checkout venv": _build_checkout_venv,
    "previous release venv": _build_previous_release_venv,
    "debian package": _build_debian_package,
}
DEPENDS = {"checkout venv": ("checkout wheel",)}
