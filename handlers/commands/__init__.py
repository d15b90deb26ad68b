"""The `/sky` subcommands. Each module exposes COMMAND; `command_table()` collects them."""

from __future__ import annotations

from handlers.commands import df, disk, free, gpus, jobs, notify, why
from handlers.commands.account import LINK, UNLINK, WHOAMI
from handlers.commands.help import help_command
from handlers.commands.submit import CANCEL, SUBMIT
from handlers.router import CommandTable


def command_table() -> CommandTable:
    table = CommandTable()
    table.add(help_command(table))
    # The order here is the order `/sky help` lists them in.
    for module in (gpus, jobs, free, disk, df, why):
        table.add(module.COMMAND)
    for command in (SUBMIT, CANCEL, notify.COMMAND, LINK, WHOAMI, UNLINK):
        table.add(command)
    return table
