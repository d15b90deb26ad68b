"""`skybot console`: type `/sky …` locally and see the answers skybot would give in Slack.

It runs the same pollers and the same command code as `skybot run`, against the real store,
with a prompt in place of a Slack workspace.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import sys
from typing import TextIO

from bot.cluster_wing import snapshot_cache
from bot.config import Config, database_path
from handlers.commands import command_table
from handlers.request import CommandRequest
from handlers.router import dispatch
from scheduler.slurm.poller import SlurmPoller
from scheduler.storage_poller import StoragePoller
from store.clusters import adopt_unnamed_rows
from store.writer import StoreWriter

BANNER = (
    "skybot console: type /sky commands (e.g. `/sky help`, `/sky gpus hoffman-lab`).\n"
    "`--as USER` switches who you are; Ctrl-D quits."
)


def default_user() -> str:
    return os.environ.get("SUDO_USER") or getpass.getuser()


async def run_console(
    config: Config, as_user: str | None, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout
) -> int:
    path = database_path(config)
    writer = StoreWriter(path)
    cache = snapshot_cache(config)
    table = command_table(config.template)
    user = as_user or default_user()
    interactive = stdin.isatty()
    try:
        await _poll_once(config, writer)
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
            view = await cache.refresh()
            request = CommandRequest(
                team_id="console", user_id=f"console:{user}", text=text, cluster_user=user
            )
            reply = await dispatch(table, request, view)
            print(for_terminal(reply.text), file=stdout, flush=True)
    finally:
        cache.close()
        writer.close()


def for_terminal(text: str) -> str:
    """Slack's three escapes undone: a terminal shows `torch>=2`, not `torch&gt;=2`."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


async def _poll_once(config: Config, writer: StoreWriter) -> None:
    """Fresh data before the first prompt; a Slurm outage shows up as a warning in answers."""
    cluster = config.default_cluster.name
    await writer.run(adopt_unnamed_rows, cluster)
    slurm = SlurmPoller(config, writer, cluster=cluster)
    try:
        await asyncio.gather(
            slurm.poll_caps(),
            slurm.poll_limits(),
            StoragePoller(config, writer, cluster=cluster).poll(),
        )
        await slurm.poll_jobs()
    finally:
        await slurm.close()
