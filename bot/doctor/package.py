"""The installed package: every module of skybot imports, from this install only."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

from bot.doctor.checklist import Check

# The packages `skybot run` is made of (pyproject.toml finds the same ones).
PRODUCT_PACKAGES = ("bot", "handlers", "scheduler", "store", "core")


def check_package() -> Check:
    """Import every module of the installed skybot, as `skybot run` eventually will: a wheel
    that left a package out fails here, not at the bot's first command."""
    from bot import __version__
    from bot.install import SHIPPED, shipped_text

    failed: list[str] = []
    count = 0
    for top in PRODUCT_PACKAGES:
        try:
            package = importlib.import_module(top)
        except Exception as error:  # reported, not raised: that is the check
            failed.append(f"{top} ({type(error).__name__}: {error})")
            continue
        walk = pkgutil.walk_packages(package.__path__, f"{top}.", onerror=failed.append)
        for module in walk:
            count += 1
            try:
                importlib.import_module(module.name)
            except Exception as error:  # reported, not raised: that is the check
                failed.append(f"{module.name} ({type(error).__name__}: {error})")
    for name in SHIPPED:
        try:
            shipped_text(name)
        except OSError as error:
            failed.append(f"the shipped {name} file ({error.strerror})")
    where = Path(importlib.import_module("bot").__file__ or "bot").parent.parent
    # A module the install lacks can still import from another copy (an old editable install,
    # a checkout on sys.path): the service would run a mixture.
    failed += [
        f"{name} (imported from {module.__file__}, outside this install)"
        for name, module in sorted(sys.modules.items())
        if name.partition(".")[0] in PRODUCT_PACKAGES
        and (file := getattr(module, "__file__", None))
        and not Path(file).is_relative_to(where)
    ]
    if failed:
        return Check(
            "package",
            False,
            f"skybot {__version__} in {where} is incomplete: {'; '.join(failed)}",
            "Reinstall skybot from a complete wheel (`pip install --force-reinstall "
            "skybot-VERSION.whl` into the service's venv).",
        )
    return Check("package", True, f"skybot {__version__}: all {count} modules import from {where}")
