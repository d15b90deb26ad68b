"""`skybot install`: put the files a deployment needs in place, from the installed package.

The runner, its sudoers rule, the systemd unit and the example config ship inside the wheel
(`bot/install_files/`), so an install needs no git checkout and always matches the skybot that
installs it. Every step is idempotent (an unchanged file is left alone and said so), writes a
temporary file beside the destination and renames it (nothing ever sees half a file), and
validates before it replaces: the runner must parse with its interpreter, the sudoers rule must
pass `visudo -cf`. An admin's edited config is never overwritten.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from bot import __version__

if TYPE_CHECKING:
    from bot.config import Config

SERVICE_USER = "skybot"
USERS_GROUP = "skybot-users"
DEFAULT_PYTHON = "/usr/bin/python3"
# The ExecStart the shipped unit names; rewritten to the skybot that installs the unit.
UNIT_SKYBOT = "/opt/skybot/bin/skybot"
RUNNER_VERSION_LINE = re.compile(r'^VERSION = "[^"\n]*"$', re.MULTILINE)

# What `skybot show NAME` prints: the file shipped in the package.
SHIPPED = {
    "runner": "skybot_runner.py",
    "sudoers": "skybot.sudoers",
    "unit": "skybot.service",
    "config": "skybot.example.toml",
    "manifest": "slack-app-manifest.yaml",
    # Prometheus alerting rules for skybot's own figures (tests/test_alert_rules.py).
    "alerts": "skybot.rules.yml",
}
# What `skybot install` places, in the order it places them (no target: all of them).
TARGETS = ("runner", "sudoers", "config", "unit")


class InstallError(Exception):
    """A step refused to go on; nothing was changed by that step."""


def shipped_text(name: str) -> str:
    """A file shipped in the package, by its SHIPPED name."""
    return (files("bot") / "install_files" / SHIPPED[name]).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Placement:
    """Where a file goes and how it must look there."""

    path: Path
    mode: int
    group: str = "root"


def _gid(group: str) -> int:
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise InstallError(f"group {group} does not exist") from None


def place(
    content: str, where: Placement, validate: Callable[[Path], str | None] | None = None
) -> bool:
    """Write `content` to `where` (root-owned) unless it is there already; True if written.

    The temporary file starts with a dot: sudo ignores such names in /etc/sudoers.d, so a
    rejected rule never takes effect, even for a moment.
    """
    gid = _gid(where.group)
    data = content.encode("utf-8")
    where.path.parent.mkdir(parents=True, exist_ok=True)
    current = where.path.read_bytes() if where.path.is_file() else None
    if current == data:
        os.chown(where.path, 0, gid)
        os.chmod(where.path, where.mode)
        return False
    fd, name = tempfile.mkstemp(prefix=f".{where.path.name}.", dir=where.path.parent)
    temporary = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chown(temporary, 0, gid)
        os.chmod(temporary, where.mode)
        problem = validate(temporary) if validate else None
        if problem:
            raise InstallError(f"{problem}; {where.path} was not changed")
        temporary.replace(where.path)
    finally:
        temporary.unlink(missing_ok=True)
    return True


# -- the runner --------------------------------------------------------------------------------


def _check_root_owned_path(python: str) -> None:
    """The interpreter and every directory above it (and above its real file) must be
    root-owned and not writable by others: whoever can change it acts as every user."""
    if not python.startswith("/"):
        raise InstallError(f"the runner's interpreter must be an absolute path, not {python}")
    real = os.path.realpath(python)
    if not os.access(real, os.X_OK) or not os.path.isfile(real):
        raise InstallError(f"{python} is not an executable (give --python the system python3)")
    for start in (Path(python), Path(real)):
        for path in (start, *start.parents):
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                continue  # a symlink's own bits mean nothing; its target is checked too
            if info.st_uid != 0:
                raise InstallError(f"{path} (on the way to {python}) is not owned by root")
            if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                raise InstallError(f"{path} (on the way to {python}) is writable by non-root users")


def runner_text(python: str) -> str:
    """The shipped runner with its interpreter line and this skybot's version written in."""
    source = shipped_text("runner")
    first, _, rest = source.partition("\n")
    if not first.startswith("#!") or len(RUNNER_VERSION_LINE.findall(rest)) != 1:
        raise InstallError("the packaged runner is damaged (no #! line or VERSION line)")
    rest = RUNNER_VERSION_LINE.sub(f'VERSION = "{__version__}"', rest)
    return f"#!{python} -IS\n{rest}"


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), capture_output=True, text=True, timeout=60, check=False, cwd="/"
    )


def install_runner(destination: Path, python: str) -> str:
    _check_root_owned_path(python)
    version = _run([python, "-IS", "-c", "import sys; print(sys.version_info >= (3, 9))"])
    if version.stdout.strip() != "True":
        raise InstallError(f"{python} is not Python 3.9 or newer")
    notes = ""
    if _run([python, "-IS", "-c", "import tomllib"]).returncode != 0:
        notes = f" (note: {python} has no tomllib, so /etc/skybot/runner.toml cannot be used)"

    def parses(path: Path) -> str | None:
        check = "import ast, sys; ast.parse(open(sys.argv[1]).read())"
        result = _run([python, "-IS", "-c", check, str(path)])
        return f"the runner does not parse with {python}" if result.returncode else None

    written = place(runner_text(python), Placement(destination, 0o755), parses)
    state = "installed:" if written else "is up to date:"
    return f"{destination} {state} skybot-runner {__version__}, interpreter {python}{notes}"


# -- the sudoers rule --------------------------------------------------------------------------


def _visudo() -> str:
    visudo = shutil.which("visudo", path="/usr/sbin:/sbin:/usr/bin:/bin")
    if visudo is None:
        raise InstallError("visudo is not installed: install sudo first")
    return visudo


def visudo_rejects(path: Path) -> str | None:
    """Why `visudo -cf` refuses the sudoers file at `path`, or None if it accepts it."""
    result = _run([_visudo(), "-cqf", str(path)])
    if result.returncode == 0:
        return None
    return f"visudo rejected the rule: {(result.stdout + result.stderr).strip()}"


def install_sudoers(destination: Path, system_root: Path) -> str:
    for check, what in (
        (lambda: pwd.getpwnam(SERVICE_USER), f"the service user {SERVICE_USER}"),
        (lambda: grp.getgrnam(USERS_GROUP), f"the group {USERS_GROUP}"),
    ):
        try:
            check()
        except KeyError:
            raise InstallError(
                f"{what} does not exist; create it first (README, step 1), so the rule "
                "refers to real names"
            ) from None
    written = place(shipped_text("sudoers"), Placement(destination, 0o440), visudo_rejects)
    notes = ""
    sudoers = system_root / "etc/sudoers"
    if sudoers.is_file() and not re.search(
        r"^[@#]includedir /etc/sudoers.d\b", sudoers.read_text(errors="replace"), re.MULTILINE
    ):
        notes = " (warning: /etc/sudoers has no '@includedir /etc/sudoers.d': add it)"
    if system_root == Path("/") and _run([_visudo(), "-cq"]).returncode != 0:
        raise InstallError("the installed sudoers configuration does not parse: run visudo -c")
    state = "installed:" if written else "is up to date:"
    return f"{destination} {state} {SERVICE_USER} may run the runner as %{USERS_GROUP}{notes}"


# -- the config and the unit -------------------------------------------------------------------


def install_config(destination: Path) -> str:
    """The example config, root:skybot 0640, only if there is none: it is the admin's file."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    os.chown(destination.parent, 0, 0)
    # The runner, running as a user, reads /etc/skybot/runner.toml: the directory stays 0755.
    os.chmod(destination.parent, 0o755)
    if destination.exists():
        return f"{destination} exists and was left as it is (compare with `skybot show config`)"
    place(shipped_text("config"), Placement(destination, 0o640, group=SERVICE_USER))
    return f"{destination} installed from the example: edit it, then `skybot check-config`"


def unit_text(skybot: Path) -> str:
    """The shipped unit, running the skybot that installs it when that is not /opt/skybot's."""
    text = shipped_text("unit")
    if str(skybot) != UNIT_SKYBOT and skybot.is_file():
        text = text.replace(f"ExecStart={UNIT_SKYBOT} ", f"ExecStart={skybot} ")
    return text


def _this_skybot() -> Path:
    """The `skybot` script of this install: beside a venv's python, or the one running."""
    beside = Path(sys.executable).parent / "skybot"
    running = Path(sys.argv[0]).absolute()
    return running if not beside.is_file() and running.name == "skybot" else beside


def install_unit(destination: Path, system_root: Path) -> str:
    text = unit_text(_this_skybot())
    written = place(text, Placement(destination, 0o644))
    program = re.search(r"^ExecStart=(\S+)", text, re.MULTILINE)
    runs = f"runs {program.group(1)}" if program else ""
    if program and not Path(program.group(1)).is_file():
        runs += " (which does not exist here: correct ExecStart)"
    if not written:
        return f"{destination} is up to date: {runs}"
    if system_root == Path("/") and Path("/run/systemd/system").is_dir():
        _run(["systemctl", "daemon-reload"])
        then = "systemd reloaded; start it with `systemctl enable --now skybot`"
    else:
        then = "then `systemctl daemon-reload && systemctl enable --now skybot`"
    return f"{destination} installed: {runs}; {then}"


# -- the command -------------------------------------------------------------------------------


def install(targets: Sequence[str], python: str, system_root: Path) -> int:
    """Place each target (all when none), print one line each; 0 if all were placed."""
    if os.geteuid() != 0:
        print(
            "skybot install: must run as root: it installs a root-owned runner, a sudoers "
            "rule, a systemd unit and /etc/skybot (nothing was changed)",
            file=sys.stderr,
        )
        return 1
    steps: dict[str, Callable[[], str]] = {
        "runner": lambda: install_runner(system_root / "usr/local/libexec/skybot-runner", python),
        "sudoers": lambda: install_sudoers(system_root / "etc/sudoers.d/skybot", system_root),
        "config": lambda: install_config(system_root / "etc/skybot/skybot.toml"),
        "unit": lambda: install_unit(
            system_root / "etc/systemd/system/skybot.service", system_root
        ),
    }
    for target in [t for t in TARGETS if t in targets] if targets else TARGETS:
        try:
            print(f"{target}: {steps[target]()}")
        except (InstallError, OSError) as error:
            print(f"skybot install: {target}: {error}", file=sys.stderr)
            return 1
    return 0


def show(name: str, http_url: str | None = None, config: Config | None = None) -> int:
    """Print a shipped file; the manifest is rendered for `config` (its scopes) and, with
    `http_url`, for HTTP mode."""
    # Here, not at the top: `skybot install` imports this module under the system python3
    # too, where msgspec (the config's schema) may not be installed.
    from bot.config import Config
    from bot.manifest import http_manifest, manifest_for

    text = shipped_text(name)
    if name == "manifest":
        config = config or Config()
        text = manifest_for(text, config)
        if config.slack.mode == "http" and http_url is None:
            print(
                'skybot show: the config says slack.mode = "http": give the URL Slack is to '
                "send to, --http-url https://HOST/slack/events (a Socket Mode manifest would "
                "not reach this bot)",
                file=sys.stderr,
            )
            return 2
    if http_url is not None:
        if name != "manifest":
            print("skybot show: --http-url goes with the manifest only", file=sys.stderr)
            return 2
        try:
            text = http_manifest(text, http_url)
        except ValueError as problem:
            print(f"skybot show: {problem}", file=sys.stderr)
            return 2
    with contextlib.suppress(BrokenPipeError):
        sys.stdout.write(text)
    return 0
