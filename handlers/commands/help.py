"""`/sky help [COMMAND]`: what skybot can do, read from the command table itself."""

from __future__ import annotations

from core.slack_text import literal
from core.view import ClusterView
from handlers.reply import Reply, context, header, section
from handlers.router import Command, CommandRequest, CommandTable, UsageError

FOOTER = (
    "Answers come from skybot's cached view of the cluster, refreshed every few seconds, "
    "so asking never slows Slurm down. Add `--here` to post an answer in the channel "
    "(answers about who you are — `link`, `whoami`, `unlink` — are only ever shown to you)."
)


def help_command(table: CommandTable) -> Command:
    """Help lists whatever the table holds, so a new command documents itself."""

    def run(request: CommandRequest, view: ClusterView) -> Reply:
        if request.args:
            return _one(table, request.args[0].lower())
        lines = command_lines(table)
        text = "skybot commands:\n" + "\n".join(lines) + "\n" + FOOTER
        return Reply(text, [header("skybot commands"), section("\n".join(lines)), context(FOOTER)])

    return Command(
        "help", "help [COMMAND]", "list the commands, or explain one", run, about_cluster=False
    )


def command_lines(table: CommandTable) -> list[str]:
    """One line per command: usage and summary, in the table's order."""
    return [f"`/sky {c.usage}` — {c.summary}" for c in table.all()]


def _one(table: CommandTable, name: str) -> Reply:
    command = table.get(name)
    if command is None:
        hint = table.suggest(name)
        maybe = f" Did you mean `/sky help {hint}`?" if hint else ""
        raise UsageError(f"There is no {literal(name, 40)} command.{maybe} Try `/sky help`.")
    text = f"`/sky {command.usage}`\n{command.summary}"
    if command.details:
        text += f"\n{command.details}"
    return Reply(text, [section(text)])
