"""deploy/build-deb.sh names no package index: pip's own configuration on the building machine
says where the venv's pinned dependencies come from, and a pip told to use none is refused
before anything is built, in one line (the build itself: tests/test_debian_package_cluster.py).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "deploy" / "build-deb.sh"


def test_a_pip_without_an_index_is_refused_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(BUILD), str(tmp_path / "out")],
        env={**os.environ, "PIP_NO_INDEX": "1"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("build-deb: pip is configured with no package index"), line
    assert not list((tmp_path / "out").glob("*.deb"))


def test_the_checkout_names_no_index_host() -> None:
    """The lock, the build script and the package's rules leave the index to pip's config."""
    for name in ("deploy/requirements.lock", "deploy/build-deb.sh", "debian/rules"):
        text = (REPO / name).read_text()
        assert "--index-url" not in text and "pypi.org" not in text, name
        assert "--extra-index-url" not in text, name
