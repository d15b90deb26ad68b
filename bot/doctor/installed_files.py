"""The installed files are the wheel's: each one against the hash in skybot's RECORD.

skybot's packages are top-level (`bot`, `core`, `handlers`, `scheduler`, `store`: the
product's layout), so another distribution installed into the same environment can ship a
file of the same name and overwrite skybot's without a word from pip. The README installs
skybot into a venv of its own; this check notices when that was not done, or was undone.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from bot.doctor.checklist import Check
from bot.doctor.package import PRODUCT_PACKAGES

DISTRIBUTION = "skybot"
FIX_OWN_VENV = (
    "Install skybot into a venv of its own, as the README does (`python3 -m venv /opt/skybot`, "
    "then `/opt/skybot/bin/pip install skybot-VERSION.whl`), or reinstall it there with "
    "`pip install --force-reinstall`."
)


def check_installed_files(dist: metadata.Distribution | None = None) -> Check:
    """Every file of skybot's packages hashes as its RECORD says, and no other distribution in
    this environment installs files into those packages. `dist`: the installed skybot's."""
    if dist is None:
        try:
            dist = metadata.distribution(DISTRIBUTION)
        except metadata.PackageNotFoundError:
            return Check("files", True, "skybot runs from a source tree: not checked")
    if _is_editable(dist):
        return Check("files", True, "an editable install: the files are the checkout's")
    ours = [f for f in dist.files or () if _in_product(f)]
    changed = [str(f) for f in ours if f.hash is not None and _hash_of(f) != f.hash.value]
    owners = _other_owners({str(f) for f in ours}, dist)
    if not changed and not owners:
        return Check("files", True, f"all {len(ours)} files match the wheel's RECORD")
    details = []
    if changed:
        details.append(f"{len(changed)} file(s) differ from the wheel: {_few(changed)}")
    if owners:
        shared = "; ".join(f"{name} ({_few(paths)})" for name, paths in sorted(owners.items()))
        details.append(f"other distributions install into skybot's packages: {shared}")
    return Check("files", False, ", and ".join(details), FIX_OWN_VENV)


def _is_editable(dist: metadata.Distribution) -> bool:
    text = dist.read_text("direct_url.json")
    try:
        return bool(text and json.loads(text).get("dir_info", {}).get("editable"))
    except ValueError:
        return False


def _in_product(path: metadata.PackagePath) -> bool:
    return bool(path.parts) and path.parts[0] in PRODUCT_PACKAGES and path.suffix != ".pyc"


def _hash_of(path: metadata.PackagePath) -> str | None:
    """The file's digest as RECORD writes it (urlsafe base64, no padding); None if unreadable."""
    assert path.hash is not None
    try:
        data = Path(str(path.locate())).read_bytes()
    except OSError:
        return None
    digest = hashlib.new(path.hash.mode, data).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _other_owners(ours: set[str], skybot: metadata.Distribution) -> dict[str, list[str]]:
    """Other distributions of this environment that list one of skybot's files."""
    owners: dict[str, list[str]] = {}
    for dist in _same_environment(skybot):
        name = dist.metadata["Name"] or "?"
        if name.lower() == DISTRIBUTION:
            continue
        clash = sorted(str(f) for f in dist.files or () if str(f) in ours)
        if clash:
            owners[name] = clash
    return owners


def _same_environment(skybot: metadata.Distribution) -> Iterable[metadata.Distribution]:
    site = Path(str(skybot.locate_file(""))).resolve()
    return metadata.distributions(path=[str(site)])


def _few(paths: list[str], shown: int = 3) -> str:
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more
