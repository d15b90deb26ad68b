"""A test user's ~/.config as the test found it, whatever the test did to it: skybot's link
directory, POSIX ACLs (setfacl) on ~/.config, and the home directory's mode."""

from __future__ import annotations

import contextlib
import pwd
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def restored_config(user: str) -> Iterator[Path]:
    home = Path(pwd.getpwnam(user).pw_dir)
    config = home / ".config"
    existed = config.exists()
    saved = None
    if (config / "skybot").exists():
        saved = config / f"skybot.saved-{uuid.uuid4().hex[:8]}"
        (config / "skybot").rename(saved)
    home_mode = home.stat().st_mode & 0o7777
    try:
        yield config
    finally:
        home.chmod(home_mode)
        shutil.rmtree(config / "skybot", ignore_errors=True)
        if saved is not None:
            saved.rename(config / "skybot")
        if existed:
            subprocess.run(["setfacl", "-b", "-k", str(config)], check=True)
        else:
            shutil.rmtree(config, ignore_errors=True)
