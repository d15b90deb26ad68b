"""Where skybot's version comes from (versioningit's `vcs` step, pyproject.toml).

The version is `<last v* tag>.post<commits since it>+g<commit>` (v0.1.0 and the count from the
first commit while there is no tag), so it grows with every commit. That count needs the
history, so a build that cannot see it refuses in one line rather than guess lower:

- a full clone: counted by git (versioningit's own `git` method);
- a shallow clone (`git clone --depth N`): refused, it would count only N commits;
- a `git archive` (`.git_archival.txt`, filled in by git through `.gitattributes`'
  export-subst): git writes `git describe` there, which has the count when a v* tag is in
  the history; without a tag it is empty and the build is refused;
- an sdist: neither, and versioningit reads the version its PKG-INFO carries.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from versioningit.core import VCSDescription
from versioningit.errors import Error, NotVCSError
from versioningit.git import describe_git, describe_git_archive

ARCHIVAL = ".git_archival.txt"


class Refused(Error):
    """The build cannot know its version from what it was given; the message says why."""


def describe(*, project_dir: str | Path, params: dict[str, Any]) -> VCSDescription:
    project = Path(project_dir)
    if (project / ".git").exists():
        shallow = subprocess.run(
            ["git", "rev-parse", "--is-shallow-repository"],
            cwd=project, capture_output=True, text=True, check=False,
        ).stdout.strip()  # fmt: skip
        if shallow == "true":
            raise Refused(
                "skybot: refusing to build from a shallow clone: its version counts the "
                "commits since the last v* tag; run `git fetch --unshallow` first"
            )
        return describe_git(project_dir=project, params=params)
    described = _archived_describe(project / ARCHIVAL)
    if described is None and (project / "PKG-INFO").is_file():
        raise NotVCSError(f"{project} is an sdist")  # versioningit reads its PKG-INFO
    if described is None:
        raise Refused(
            "skybot: refusing to build from a tree that is neither a git clone, a git archive "
            "nor an sdist: it has no version"
        )
    if not described:
        raise Refused(
            "skybot: refusing to build from a git archive of a commit with no v* tag in its "
            "history: its version counts commits; build from a full clone"
        )
    archive_params = {"default-tag": params.get("default-tag"), "describe-subst": described}
    return describe_git_archive(project_dir=project, params=archive_params)


def _archived_describe(archival: Path) -> str | None:
    """What git wrote for `describe-name` in an archive, or None when this is no archive."""
    if not archival.is_file():
        return None
    for line in archival.read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "describe-name":
            value = value.strip()
            return None if value.startswith("$Format") else value
    return None
