"""The sudo rule: the service user may run the runner, and nothing broader."""

from __future__ import annotations

import re

from bot.config import Config
from bot.doctor.checklist import Check
from bot.doctor.runner import INSTALL_RUNNER
from bot.doctor.service_user import COMMAND_TIMEOUT_SECONDS, ServiceUser, run_command

# "(%skybot-users) NOPASSWD: /usr/local/libexec/skybot-runner """ in `sudo -l` output.
_RULE = re.compile(r"^\s*\(([^)]*)\)\s*(.*)$")
_TAGS = re.compile(
    r"\b(?:NO)?(?:PASSWD|EXEC|SETENV|LOG_INPUT|LOG_OUTPUT|MAIL|FOLLOW|INTERCEPT):\s*"
)


def parse_sudo_rules(listing: str) -> list[tuple[str, list[str]]]:
    """(run-as list, commands) for each rule line `sudo -l` printed."""
    rules = []
    for line in listing.splitlines():
        match = _RULE.match(line)
        if match:
            commands = [c.strip() for c in _TAGS.sub("", match.group(2)).split(",") if c.strip()]
            rules.append((match.group(1).strip(), commands))
    return rules


def judge_sudo_rules(rules: list[tuple[str, list[str]]], runner: str) -> tuple[bool, str]:
    """Whether the rules allow exactly the runner, and nothing like ALL."""
    too_broad = [
        f"({runas}) {', '.join(cmds)}"
        for runas, cmds in rules
        if "ALL" in cmds or any(part.strip() in ("ALL", "ALL : ALL") for part in runas.split(","))
    ]
    if too_broad:
        return False, f"the rule is far too broad: {'; '.join(too_broad)}"
    runner_rules = [
        (runas, cmd) for runas, cmds in rules for cmd in cmds if cmd.split()[0] == runner
    ]
    if not runner_rules:
        return False, f"{runner} is not among the commands it may run"
    runas, cmd = runner_rules[0]
    return True, f"may run {cmd} as ({runas})"


async def check_sudo(config: Config, user: ServiceUser) -> Check:
    """`sudo -l -n` as the service user must list the runner, and never ALL."""
    fix = (
        f"Install the sudoers rule ({INSTALL_RUNNER}); it must let {user.name} run "
        f"{config.runner.path} with no arguments as %skybot-users, never ALL."
    )
    if user.name == "root":
        return Check(
            "sudo rule",
            False,
            "the service user is root",
            "Run skybot as its own unprivileged service user (skybot), never as root.",
        )
    argv = [*user.prefix(), config.runner.sudo, "-l", "-n"]
    status, output = await run_command(argv, COMMAND_TIMEOUT_SECONDS)
    if status != 0:
        last = output.strip().splitlines()[-1] if output.strip() else f"exit status {status}"
        return Check("sudo rule", False, f"sudo -l -n as {user.name} failed: {last}", fix)
    ok, detail = judge_sudo_rules(parse_sudo_rules(output), config.runner.path)
    return Check("sudo rule", ok, f"{user.name} {detail}", "" if ok else fix)
