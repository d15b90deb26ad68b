"""`skybot install` and `skybot show`: the files a deployment needs, from the package itself.

The runner and the sudoers rule go to their real places (tests/test_runner.py installs and
exercises them). Here the config and the unit are installed below a staging root (`--root`),
so this machine's /etc is not touched: an /etc/skybot/skybot.toml would become every other
test's default config.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bot import __version__
from bot.install import InstallError, Placement, place, runner_text, visudo_rejects

REPO = Path(__file__).resolve().parent.parent
INSTALL_FILES = REPO / "bot" / "install_files"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="installs root-owned files: run as root")


def skybot(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI from this checkout."""
    return run([sys.executable, "-m", "bot.cli", *args])


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )


def owner_and_mode(path: Path) -> tuple[str, int, int]:
    info = path.stat()
    return pwd.getpwuid(info.st_uid).pw_name, info.st_gid, info.st_mode & 0o7777


def test_config_and_unit_are_placed_once_and_an_edited_config_is_kept(tmp_path: Path) -> None:
    first = skybot("install", "--root", str(tmp_path), "config", "unit")
    assert first.returncode == 0, first.stderr
    config = tmp_path / "etc/skybot/skybot.toml"
    unit = tmp_path / "etc/systemd/system/skybot.service"
    assert f"config: {config} installed from the example" in first.stdout
    assert f"unit: {unit} installed: runs " in first.stdout
    assert config.read_text() == (INSTALL_FILES / "skybot.example.toml").read_text()
    skybot_gid = pwd.getpwnam("skybot").pw_gid
    assert owner_and_mode(config) == ("root", skybot_gid, 0o640)
    assert owner_and_mode(config.parent) == ("root", 0, 0o755)  # the runner reads runner.toml
    assert owner_and_mode(unit) == ("root", 0, 0o644)
    # The unit runs the skybot beside this interpreter when there is one (a venv's), else the
    # shipped /opt/skybot path.
    here = Path(sys.executable).parent / "skybot"
    expected = here if here.is_file() else Path("/opt/skybot/bin/skybot")
    assert f"ExecStart={expected} run --config /etc/skybot/skybot.toml\n" in unit.read_text()

    config.write_text("# the admin's own\n")
    again = skybot("install", "--root", str(tmp_path), "config", "unit")
    assert again.returncode == 0, again.stderr
    assert "installed" not in again.stdout
    assert f"{config} exists and was left as it is" in again.stdout
    assert f"{unit} is up to date" in again.stdout
    assert config.read_text() == "# the admin's own\n"


def test_install_refuses_clearly_when_not_root(tmp_path: Path) -> None:
    # This test's interpreter may live where alice cannot run it (pyenv under /root); the
    # install step itself needs only the standard library, so the system python runs it.
    staging = tmp_path / "staging"
    tmp_path.chmod(0o755)
    install = (
        "import sys; from pathlib import Path; from bot.install import install; "
        f"sys.exit(install([], '/usr/bin/python3', Path('{staging}')))"
    )
    result = run(["/usr/sbin/runuser", "-u", "alice", "--", "/usr/bin/python3", "-c", install])
    assert result.returncode == 1
    assert result.stderr.startswith("skybot install: must run as root")
    assert "Traceback" not in result.stderr
    assert not staging.exists()
    assert skybot("install", "nonsense").stderr.startswith(
        "skybot install: unknown target(s) nonsense"
    )


def test_a_sudoers_rule_visudo_rejects_is_never_put_in_place(tmp_path: Path) -> None:
    destination = tmp_path / "skybot"
    destination.write_text("# the rule that was there\n")
    broken = "skybot ALL = (%skybot-users NOPASSWD: /usr/local/libexec/skybot-runner\n"
    with pytest.raises(InstallError, match=r"visudo rejected the rule(.|\n)*was not changed"):
        place(broken, Placement(destination, 0o440), visudo_rejects)
    assert destination.read_text() == "# the rule that was there\n"
    assert [p.name for p in tmp_path.iterdir()] == ["skybot"]  # no temporary file left
    # The shipped rule passes the same check.
    assert place((INSTALL_FILES / "skybot.sudoers").read_text(), Placement(destination, 0o440))
    assert visudo_rejects(destination) is None


def test_the_runner_gets_its_interpreter_and_this_version_written_in() -> None:
    text = runner_text("/usr/bin/python3")
    assert text.splitlines()[0] == "#!/usr/bin/python3 -IS"
    assert f'\nVERSION = "{__version__}"\n' in text
    shipped = (INSTALL_FILES / "skybot_runner.py").read_text()
    assert text.splitlines()[1:] == [
        f'VERSION = "{__version__}"' if line.startswith("VERSION = ") else line
        for line in shipped.splitlines()[1:]
    ]


def test_the_runner_refuses_an_interpreter_others_could_change(tmp_path: Path) -> None:
    """/tmp is writable by everyone: a python there would let anyone act as every user."""
    python = tmp_path / "python3"
    python.symlink_to("/usr/bin/python3")
    result = skybot(
        "install", "--root", str(tmp_path / "staging"), "runner", "--python", str(python)
    )
    assert result.returncode == 1
    assert "is writable by non-root users" in result.stderr, result.stderr
    assert not (tmp_path / "staging/usr/local/libexec/skybot-runner").exists()


def test_show_prints_the_shipped_files_and_version_is_single_sourced() -> None:
    manifest = skybot("show", "manifest")
    assert manifest.returncode == 0
    assert yaml.safe_load(manifest.stdout)["features"]["slash_commands"][0]["command"] == "/sky"
    assert skybot("show", "sudoers").stdout == (INSTALL_FILES / "skybot.sudoers").read_text()
    assert skybot("--version").stdout == f"skybot {__version__}\n"
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    # The build writes git's version into bot/_version.py, and bot/__init__.py reads it.
    assert '[tool.versioningit.write]\nfile = "bot/_version.py"' in pyproject
    assert "bot._version" in (REPO / "bot" / "__init__.py").read_text()
    assert "MIT License" in (REPO / "LICENSE").read_text()
    assert 'license = { text = "MIT" }' in pyproject


def test_show_manifest_for_http_mode() -> None:
    url = "https://skybot.example.org/slack/events"
    http = skybot("show", "manifest", "--http-url", url)
    assert http.returncode == 0, http.stderr
    settings = yaml.safe_load(http.stdout)["settings"]
    assert settings["socket_mode_enabled"] is False
    assert settings["interactivity"]["request_url"] == url
    wrong = skybot("show", "manifest", "--http-url", "http://insecure/slack/events")
    assert wrong.returncode == 2 and "is not an https URL" in wrong.stderr
    assert skybot("show", "sudoers", "--http-url", url).returncode == 2
