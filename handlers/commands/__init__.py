"""The `/sky` subcommands. Each module exposes COMMAND; `command_table()` collects them."""

from __future__ import annotations

from handlers.commands.help import help_command
from handlers.router import CommandTable


def command_table() -> CommandTable:
    table = CommandTable()
    table.add(help_command(table))
    return table
