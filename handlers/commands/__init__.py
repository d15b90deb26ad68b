"""The `/sky` subcommands. Each module exposes COMMAND; `command_table()` collects them."""

from __future__ import annotations

from core.job_template import TemplateSettings
from handlers.commands import df, digest, disk, free, gpus, images, jobs, notify, why
from handlers.commands.account import LINK, UNLINK, WHOAMI
from handlers.commands.cancel import CANCEL
from handlers.commands.help import help_command
from handlers.commands.submit import SUBMIT
from handlers.commands.template import template_command
from handlers.router import CommandTable


def command_table(template: TemplateSettings | None = None) -> CommandTable:
    """`template`: the config's [template] rules (the defaults for tests and the Home tab)."""
    table = CommandTable()
    table.add(help_command(table))
    # The order here is the order `/sky help` lists them in.
    for module in (gpus, jobs, free, disk, df, images, why):
        table.add(module.COMMAND)
    table.add(template_command(template or TemplateSettings()))
    for command in (SUBMIT, CANCEL, notify.COMMAND, digest.COMMAND, LINK, WHOAMI, UNLINK):
        table.add(command)
    return table
