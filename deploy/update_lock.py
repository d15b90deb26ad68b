"""Write deploy/requirements.lock: every package skybot and its tests install, pinned with
hashes, resolved once for every Python skybot supports (uv's universal resolution).

    python3 -m pip install uv && python3 deploy/update_lock.py

The file has two parts. Above MARKER: what skybot itself needs (the Debian package's venv and
the tests' wheel venvs install only that part). Below it: what only the test extra adds (CI
installs the whole file, deploy/dev-setup.sh). Both come from one resolution, so a package
has the same version in each.

No index is named here: uv is given the index pip is configured with on this machine (`pip
config`), and the lock records none, so every install uses its own machine's pip config.
The lock holds the hashes of every file of each pinned version (all platforms, Pythons).
Versions already installed in this environment are kept (what the tests ran with), except
that pip itself is held at this environment's pip (sqlite-utils depends on pip).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "deploy" / "requirements.lock"
MARKER = "# ---- below: the test extra's own packages (CI and the test venvs, not the product)"
PYTHON = "3.11"  # the oldest supported; --universal adds the markers for newer ones
ENTRY = re.compile(r"^([A-Za-z0-9_.-]+)==", re.MULTILINE)


def pip_index() -> list[str]:
    """uv's option for the index pip is configured with here (none set: pip's default, which
    is uv's too). pip's extra indexes and find-links are left out: they add files for this
    machine, and the lock must carry the hashes of every platform's files."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    ).stdout
    urls = re.findall(r"^\S*\.index-url='([^']*)'$", listed, re.MULTILINE)
    return ["--index-url", urls[0]] if urls else []


def compile_lock(extra: list[str], constraints: Path, output: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "uv", "pip", "compile", str(REPO / "pyproject.toml"), *extra,
         "--universal", "--python-version", PYTHON, "--generate-hashes", "--no-emit-index-url",
         "--no-annotate", "--no-header", "-c", str(constraints), "-o", str(output),
         *pip_index()],
        check=True, capture_output=True, text=True,
    )  # fmt: skip


def entries(text: str) -> list[str]:
    """Each pinned requirement with its hash lines, as one string."""
    return [e.strip() for e in re.split(r"\n(?=\S)", text) if ENTRY.match(e.strip())]


def main() -> int:
    freeze = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--all", "--exclude-editable"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    keep = [line for line in freeze.splitlines() if "==" in line and "skybot" not in line]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        (folder / "installed.txt").write_text("\n".join(keep) + "\n")
        compile_lock(["--extra", "test"], folder / "installed.txt", folder / "all.txt")
        compile_lock([], folder / "all.txt", folder / "runtime.txt")
        everything = entries((folder / "all.txt").read_text())
        runtime = {m.group(1).lower() for m in ENTRY.finditer((folder / "runtime.txt").read_text())}
    product = [e for e in everything if ENTRY.match(e).group(1).lower() in runtime]  # type: ignore[union-attr]
    tests = [e for e in everything if e not in product]
    LOCK.write_text(
        "# skybot's lock: written by `python3 deploy/update_lock.py` (see there); do not edit.\n"
        + "\n".join(product)
        + f"\n{MARKER}\n"
        + "\n".join(tests)
        + "\n"
    )
    print(f"{LOCK.relative_to(REPO)}: {len(product)} packages for skybot, {len(tests)} for tests")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
