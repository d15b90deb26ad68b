"""Lay down, below the package root given as argument, what `skybot install` puts in place,
from the files the built skybot ships (bot/install_files/), at the Debian package's paths.

Run by debian/rules with the package venv's python, so the runner carries the packaged
skybot's version. The runner lives in /usr/libexec/skybot (Debian packages never install under
/usr/local) and its rule in /etc/sudoers.d/skybot-runner: a machine that also has
`skybot install`'s /usr/local/libexec/skybot-runner and /etc/sudoers.d/skybot keeps them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bot.install import DEFAULT_PYTHON, UNIT_SKYBOT, runner_text, shipped_text
from bot.runner_client import DEFAULT_RUNNER

RUNNER = "/usr/libexec/skybot/skybot-runner"
SKYBOT = "/usr/lib/skybot/bin/skybot"  # the venv (debian/rules)
FILES = {
    "usr/libexec/skybot/skybot-runner": 0o755,
    "etc/sudoers.d/skybot-runner": 0o440,
    "etc/skybot/skybot.toml": 0o644,  # root:skybot 0640 once the group exists (postinst)
    "lib/systemd/system/skybot.service": 0o644,
    "usr/share/skybot/skybot.rules.yml": 0o644,  # Prometheus alert rules for a site to load
}


def texts() -> dict[str, str]:
    def at_package_path(text: str) -> str:
        assert DEFAULT_RUNNER in text, f"{DEFAULT_RUNNER} is not in the shipped file"
        return text.replace(DEFAULT_RUNNER, RUNNER)

    return {
        "usr/libexec/skybot/skybot-runner": runner_text(DEFAULT_PYTHON),
        # Its own alias name: sudo refuses every rule if two files define one alias, and a
        # machine may also have `skybot install`'s /etc/sudoers.d/skybot.
        "etc/sudoers.d/skybot-runner": at_package_path(shipped_text("sudoers")).replace(
            "SKYBOT_RUNNER", "SKYBOT_PACKAGED_RUNNER"
        ),
        "etc/skybot/skybot.toml": at_package_path(shipped_text("config")),
        "lib/systemd/system/skybot.service": shipped_text("unit").replace(
            f"ExecStart={UNIT_SKYBOT} ", f"ExecStart={SKYBOT} "
        ),
        "usr/share/skybot/skybot.rules.yml": shipped_text("alerts"),
    }


def main(root: Path) -> int:
    made = texts()
    assert f"ExecStart={SKYBOT} " in made["lib/systemd/system/skybot.service"]
    for name, text in made.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        path.chmod(FILES[name])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
