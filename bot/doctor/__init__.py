"""`skybot doctor`: check an installation end to end and say how to fix what is wrong.

Each check is a small function returning `Check`s; a failure always carries one sentence
telling the admin what to do, because "auth.test failed" alone sends them searching. The
checks look at the same things the bot uses (the config, the tokens against Slack, each Slurm
command the pollers run, the sudo rule and the runner, storage roots, the database), from the
service user's point of view where permissions matter: an admin usually runs this as root,
and root can read everything the bot cannot.

Secrets are never printed: messages are built from names and Slack's error codes, and
`redact` scrubs token values from anything that reaches the output anyway.

One module per concern (config_file, slack, slurm, sudo_rule, runner, storage, database,
package); `checklist` is the line they all return, `service_user` runs commands as the bot.
"""

from __future__ import annotations

from pathlib import Path

from bot.config import Secrets
from bot.doctor.checklist import Check
from bot.doctor.config_file import check_config
from bot.doctor.database import check_database
from bot.doctor.installed_files import check_installed_files
from bot.doctor.package import check_package
from bot.doctor.runner import check_runner, check_runner_version
from bot.doctor.service_user import ServiceUser, user_problem
from bot.doctor.slack import check_slack
from bot.doctor.slurm import check_slurm
from bot.doctor.storage import check_storage
from bot.doctor.sudo_rule import check_sudo


async def run_doctor(config_file: Path | None, secrets: Secrets, user: ServiceUser) -> list[Check]:
    """Every check, in the order an admin would fix them; stops early only without a config."""
    config_check, config = check_config(config_file)
    if config is None:
        return [config_check]
    checks = [config_check, check_package(), check_installed_files()]
    checks += [*await check_slack(config, secrets), *await check_slurm(config)]
    problem = user_problem(user)
    if problem is not None:
        return [*checks, problem, check_runner(config)]
    checks += [await check_sudo(config, user), check_runner(config)]
    checks.append(await check_runner_version(config, user))
    checks += await check_storage(config, user)
    checks.append(await check_database(config, user))
    return checks
