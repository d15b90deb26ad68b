"""`skybot console`: type `/sky …` locally and see the answers skybot would give in Slack.

It runs the same pollers and the same command code as `skybot run`, against the real store,
with a prompt in place of a Slack workspace: every cluster is polled through its own source
(bot/cluster_readers.py) and a command picks its cluster as in Slack (`--cluster NAME`, a
lab's name, else the default).
"""

from __future__ import annotations

import asyncio
import getpass
import os
import sys
from typing import TextIO

from bot.adoption import adopt_rows
from bot.cluster_readers import close_every, every_cluster, poll_every_cluster, reading_desks
from bot.config import Config, database_path
from handlers.commands import command_table
from handlers.request import CommandRequest
from handlers.router import dispatch
from store.writer import StoreWriter

BANNER = (
    "skybot console: type /sky commands (e.g. `/sky help`, `/sky gpus hoffman-lab`).\n"
    "`--as USER` switches who you are; Ctrl-D quits."
)


def default_user() -> str:
    return os.environ.get("SUDO_USER") or getpass.getuser()


async def run_console(
    config: Config,
    as_user: str | None,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
    cluster: str | None = None,
) -> int:
    """`cluster`: the one commands are about unless they name one (else the default)."""
    if cluster is not None and config.cluster_named(cluster) is None:
        names = ", ".join(c.name for c in config.clusters)
        print(
            f"skybot: no cluster called {cluster!r} in the config; its clusters: {names}",
            file=sys.stderr,
        )
        return 2
    writer = StoreWriter(database_path(config))
    await adopt_rows(config, writer)
    readers = every_cluster(config, writer)
    # The cluster asked for first: the router's default.
    wanted = (cluster or "").casefold()
    first = [r for r in readers if r.cluster.name.casefold() == wanted]
    desks = reading_desks([*first, *(r for r in readers if r not in first)])
    table = command_table(config.template)
    user = as_user or default_user()
    interactive = stdin.isatty()
    try:
        # Fresh data before the first prompt; a Slurm outage shows up as a warning in answers.
        await poll_every_cluster(readers)
        if interactive:
            print(BANNER, file=stdout)
        while True:
            if interactive:
                print(f"{user}> ", end="", file=stdout, flush=True)
            line = await asyncio.to_thread(stdin.readline)
            if not line:
                return 0
            line = line.strip()
            if not line:
                continue
            if line.startswith("--as"):
                user = line.removeprefix("--as").strip() or user
                print(f"(now acting as {user})", file=stdout)
                continue
            text = line.removeprefix("/sky").strip() if line.startswith("/sky") else line
            views = [await reader.cache.refresh() for reader in readers]
            request = CommandRequest(
                team_id="console", user_id=f"console:{user}", text=text, cluster_user=user
            )
            reply = await dispatch(table, request, views[0], desks=desks)
            print(for_terminal(reply.text), file=stdout, flush=True)
    finally:
        await close_every(readers)
        writer.close()


def for_terminal(text: str) -> str:
    """Slack's three escapes undone: a terminal shows `torch>=2`, not `torch&gt;=2`."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
