"""The `/sky` subcommands: each is one `Command` value, listed once below in the order
`/sky help` shows them. `/sky help` and `/sky template` are built from what they describe
(the table itself, the config's [template] rules); every other command is a constant."""

from __future__ import annotations

from core.job_template import TemplateSettings
from handlers.commands.account import LINK, UNLINK, WHOAMI
from handlers.commands.cancel import CANCEL
from handlers.commands.df import COMMAND as DF
from handlers.commands.digest import COMMAND as DIGEST
from handlers.commands.disk import COMMAND as DISK
from handlers.commands.eff import COMMAND as EFF
from handlers.commands.free import COMMAND as FREE
from handlers.commands.gpus import COMMAND as GPUS
from handlers.commands.help import help_command
from handlers.commands.images import COMMAND as IMAGES
from handlers.commands.jobs import COMMAND as JOBS
from handlers.commands.log import COMMAND as LOG
from handlers.commands.notify import COMMAND as NOTIFY
from handlers.commands.submit import SUBMIT
from handlers.commands.template import template_command
from handlers.commands.watch import UNWATCH_COMMAND as UNWATCH
from handlers.commands.watch import WATCH
from handlers.commands.why import COMMAND as WHY
from handlers.router import CommandTable


def command_table(template: TemplateSettings | None = None) -> CommandTable:
    """`template`: the config's [template] rules (the defaults for tests and the Home tab)."""
    table = CommandTable()
    for command in (
        help_command(table),
        GPUS,
        JOBS,
        FREE,
        DISK,
        DF,
        IMAGES,
        WHY,
        template_command(template or TemplateSettings()),
        WATCH,
        UNWATCH,
        SUBMIT,
        CANCEL,
        LOG,
        EFF,
        NOTIFY,
        DIGEST,
        LINK,
        WHOAMI,
        UNLINK,
    ):
        table.add(command)
    return table
