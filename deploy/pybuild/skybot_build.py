"""skybot's build backend: setuptools', but every wheel starts from an empty build directory.

setuptools copies the packages into build/lib and leaves them there; the next build added to
what was there, so a module deleted in between was shipped again from the leftover copy. A
version skybot_version.py refuses ends the build with its one line, not a traceback.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

from setuptools import build_meta
from versioningit.errors import Error as VersionError

BUILD = Path("build")  # PEP 517 runs every hook in the source tree


def _one_line_refusal(hook: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(hook)
    def refusing(*args: Any, **kwargs: Any) -> Any:
        try:
            return hook(*args, **kwargs)
        except VersionError as error:
            raise SystemExit(str(error).strip()) from None

    return refusing


def _from_a_clean_build_directory(hook: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(hook)
    def clean(*args: Any, **kwargs: Any) -> Any:
        shutil.rmtree(BUILD, ignore_errors=True)
        try:
            return hook(*args, **kwargs)
        finally:
            shutil.rmtree(BUILD, ignore_errors=True)

    return clean


get_requires_for_build_wheel = _one_line_refusal(build_meta.get_requires_for_build_wheel)
get_requires_for_build_sdist = _one_line_refusal(build_meta.get_requires_for_build_sdist)
get_requires_for_build_editable = _one_line_refusal(build_meta.get_requires_for_build_editable)
prepare_metadata_for_build_wheel = _one_line_refusal(build_meta.prepare_metadata_for_build_wheel)
prepare_metadata_for_build_editable = _one_line_refusal(
    build_meta.prepare_metadata_for_build_editable
)
build_wheel = _one_line_refusal(_from_a_clean_build_directory(build_meta.build_wheel))
build_sdist = _one_line_refusal(build_meta.build_sdist)
build_editable = _one_line_refusal(build_meta.build_editable)
