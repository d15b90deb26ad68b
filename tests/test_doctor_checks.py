"""`skybot doctor` checks that need no Slurm, sudo or test users: they run in the fast lane.
The checks against the real machine are in test_doctor.py (marked `cluster`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from bot import __version__
from bot.doctor.sudo_rule import judge_sudo_rules, parse_sudo_rules
from tests.support.doctor_process import REPO, run_doctor
from tests.support.slack_standin import SlackStandIn

RUNNER = "/usr/local/libexec/skybot-runner"


async def test_bad_config_is_a_failed_check_that_stops(tmp_path: Path) -> None:
    config = tmp_path / "skybot.toml"
    config.write_text('[slack]\nmode = "carrier-pigeon"\n')
    async with SlackStandIn() as slack:
        result = await run_doctor(config, slack)
    assert result.status == 1
    lines = result.output.splitlines()
    assert lines[0].startswith("✘ config: slack.mode must be 'socket' or 'http'")
    assert "fix: Correct" in lines[0]
    assert lines[1:] == ["1 check(s) failed"]


def test_sudo_rules_must_name_the_runner_and_never_all() -> None:
    listing = (
        "User skybot may run the following commands on vm:\n"
        f'    (%skybot-users) NOPASSWD: {RUNNER} ""\n'
    )
    assert judge_sudo_rules(parse_sudo_rules(listing), RUNNER)[0]
    for rule in (f"(ALL, !root) NOPASSWD: {RUNNER}", "(ALL : ALL) ALL", f"(root) {RUNNER}, ALL"):
        ok, detail = judge_sudo_rules(parse_sudo_rules(f"    {rule}\n"), RUNNER)
        assert not ok and "too broad" in detail, rule


def test_the_package_check_names_a_module_the_install_left_out(tmp_path: Path) -> None:
    """An install without handlers/commands (as the old wheel was) fails the check."""
    for package in ("bot", "handlers", "scheduler", "store", "core"):
        shutil.copytree(REPO / package, tmp_path / package)
    shutil.rmtree(tmp_path / "handlers" / "commands")
    check = (
        "from bot.doctor.checklist import format_check\n"
        "from bot.doctor.package import check_package\n"
        "print(format_check(check_package()))"
    )
    result = subprocess.run(
        [sys.executable, "-c", check],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.stdout.startswith(f"✘ package: skybot {__version__} in {tmp_path} is incomplete:")
    # Without another copy of skybot on sys.path the import fails; with one (the editable
    # install dev-setup makes) it comes from there, which is as wrong.
    assert (
        "(ModuleNotFoundError: No module named 'handlers.commands')" in result.stdout
        or re.search(
            r"handlers\.commands \(imported from \S+, outside this install\)", result.stdout
        )
    ), result.stdout
    assert "fix: Reinstall skybot from a complete wheel" in result.stdout
