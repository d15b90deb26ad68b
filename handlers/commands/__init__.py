"""The `/sky` subcommands. Each module exposes COMMAND; `command_table()` collects them."""

from __future__ import annotations

from core.job_template import TemplateSettings
from handlers.commands import df, digest, disk, eff, free, gpus, images, jobs, log, notify, why
from handlers.commands.account import LINK, UNLINK, WHOAMI
from handlers.commands.help import help_command
from handlers.commands.submit import CANCEL, SUBMIT
from handlers.commands.template import template_command
from handlers.commands.watch import UNWATCH_COMMAND, WATCH
from handlers.router import CommandTable


def command_table(template: TemplateSettings | None = None) -> CommandTable:
    """`template`: the config's [template] rules (the defaults for tests and the Home tab)."""
    table = CommandTable()
    table.add(help_command(table))
    # The order here is the order `/sky help` lists them in.
    for module in (gpus, jobs, free, disk, df, images, why):
        table.add(module.COMMAND)
    table.add(template_command(template or TemplateSettings()))
    table.add(WATCH)
    table.add(UNWATCH_COMMAND)
    for command in (SUBMIT, CANCEL, log.COMMAND, eff.COMMAND, notify.COMMAND, digest.COMMAND):
        table.add(command)
    for command in (LINK, WHOAMI, UNLINK):
        table.add(command)
    return table
