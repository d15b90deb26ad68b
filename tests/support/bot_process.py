"""Running the bot in tests: as a real process (so a test can SIGKILL it), or in this one."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import aiohttp
import sqlite_utils
from msgspec.structs import replace

from bot.config import (
    Config,
    DatabaseConfig,
    IdentityConfig,
    Secrets,
    SlackConfig,
    SlurmConfig,
    load_config,
)
from bot.service import run_bot
from store.snapshots import load_source_status
from tests.support.cluster import wait_for
from tests.support.factories import CLUSTER
from tests.support.slack_standin import SlackStandIn, SlackUser

# The test users in the stand-in's one workspace, each linked to their cluster account, so
# their job DMs can be told apart.
TEAM = "T0STANDIN"
SLACK_IDS = {"alice": "UALICE", "bob": "UBOB", "carol": "UCAROL", "dave": "UDAVE"}


def standin_secrets(slack: SlackStandIn, signing_secret: str = "") -> Secrets:
    """The tokens the stand-in accepts, and where the bot reaches it."""
    return Secrets(
        bot_token=slack.bot_token,
        app_token=slack.app_token,
        signing_secret=signing_secret,
        api_url=slack.api_url,
    )


@asynccontextmanager
async def running_bot(
    config: Config, slack: SlackStandIn, signing_secret: str = "", stop_timeout: float = 30
) -> AsyncIterator[None]:
    """`skybot run` in this event loop against the stand-in; stopped (and awaited) on exit,
    so an exception inside the bot fails the test."""
    stop = asyncio.Event()
    task = asyncio.create_task(run_bot(config, standin_secrets(slack, signing_secret), stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, stop_timeout)


# `skybot` run with -v (debug logging: each Slack answer the bot receives, each poll that
# meets a failing store), for tests that wait for such a line in its log.
VERBOSE_SKYBOT = (
    sys.executable,
    "-c",
    "import sys; from bot.cli import main; sys.exit(main([*sys.argv[1:], '-v']))",
)


def start_bot(
    config_file: Path,
    slack: SlackStandIn,
    skybot: Sequence[str] = (sys.executable, "-m", "bot.cli"),
    *,
    cwd: Path | None = None,
    environment: Mapping[str, str] = os.environ,
    log: IO[bytes] | None = None,
    api_url: str | None = None,
    signing_secret: str = "",
    stderr: int | IO[bytes] = subprocess.DEVNULL,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """`skybot run` as a process with the stand-in's tokens: this checkout's by default, or
    another `skybot` command (an installed one, started from `cwd` with `environment`); its
    output to `log` (else stderr to `stderr`). `api_url` sends its Web API calls elsewhere
    (e.g. nowhere, for an unreachable Slack)."""
    env = {
        **environment,
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_APP_TOKEN": slack.app_token,
        "SLACK_API_URL": api_url or slack.api_url,
    }
    if signing_secret:
        env["SLACK_SIGNING_SECRET"] = signing_secret
    for inherited in ("JOURNAL_STREAM", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        env.pop(inherited, None)  # whatever runs the tests, the bot is not its service
    env.update(extra_env or {})
    return subprocess.Popen(
        [*skybot, "run", "--config", str(config_file)],
        env=env,
        cwd=cwd,
        stdout=log or subprocess.DEVNULL,
        stderr=subprocess.STDOUT if log else stderr,
    )


def free_port() -> int:
    """A loopback port nothing listens on right now, for the bot's HTTP mode."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_until_listening(url: str, attempts: int = 100) -> None:
    """The bot starts its HTTP server in the background: wait until it accepts connections."""
    async with aiohttp.ClientSession() as session:

        async def listening() -> bool:
            try:
                async with session.get(url):
                    return True
            except aiohttp.ClientConnectionError:
                return False

        await wait_for(listening, attempts * 0.05, f"something listening at {url}", 0.05)


def linked_users() -> list[SlackUser]:
    return [SlackUser(slack_id, user) for user, slack_id in SLACK_IDS.items()]


def linked_bot_config(tmp_path: Path, slurm: SlurmConfig | None = None, **overrides: Any) -> Config:
    """The built-in test-cluster config over Socket Mode, polling every 2 s, with its own
    database and every test user linked (`overrides` replace further sections)."""
    return replace(
        load_config(None),
        slack=SlackConfig(mode="socket"),
        slurm=slurm or SlurmConfig(poll_seconds=2),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
        identity=IdentityConfig(
            links={f"{TEAM}/{slack_id}": user for user, slack_id in SLACK_IDS.items()}
        ),
        **overrides,
    )


def _last_slurm_poll(database: Path) -> float | None:
    """When the last Slurm poll the bot stored started (None: none yet), from its database,
    read-only: the bot may be another process."""
    try:
        connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        try:
            return load_source_status(sqlite_utils.Database(connection), CLUSTER, "slurm").taken_at
        finally:
            connection.close()
    except sqlite3.OperationalError:  # no database, or not migrated yet: the bot is starting
        return None


async def wait_for_slurm_poll(
    database: Path | str, after: float | None = None, *, acted_on: bool = False, timeout: float = 30
) -> float:
    """Wait until the bot has stored a Slurm poll that started after `after` (default: now):
    it has seen the queue as it is now, and the next poll's transitions are measured against
    that. With `acted_on`, also until its snapshot is what commands answer from and its
    watchers have run: polls run one at a time, each followed by the cache refresh and the
    watchers, so that is when the next poll is stored. Returns when the (first) poll started.
    """
    since = time.time() if after is None else after

    def stored_after(moment: float) -> float | None:
        taken_at = _last_slurm_poll(Path(database))
        return taken_at if taken_at is not None and taken_at > moment else None

    what = "the bot to store a Slurm poll"
    first = await wait_for(lambda: stored_after(since), timeout, what, interval=0.1)
    if acted_on:
        await wait_for(lambda: stored_after(first), timeout, f"{what} after it", interval=0.1)
    return first


async def wait_for_slurm_polls_acted_on(
    database: Path | str, count: int, *, timeout: float = 30
) -> None:
    """Wait until `count` more Slurm polls have been stored and acted on: `count` + 1 polls
    from now (each is acted on once the next is stored). Calling `wait_for_slurm_poll(...,
    acted_on=True)` `count` times waits for 2 * `count` polls."""
    taken = await wait_for_slurm_poll(database, timeout=timeout)
    for _ in range(count):
        taken = await wait_for_slurm_poll(database, after=taken, timeout=timeout)


@asynccontextmanager
async def linked_bot(
    config: Config, signing_secret: str = "", stop_timeout: float = 30
) -> AsyncIterator[SlackStandIn]:
    """The bot with `config` (usually `linked_bot_config`'s) against a stand-in that knows every
    test user, connected to Slack, its first Slurm poll stored and acted on: what every test
    of job DMs and buttons starts from."""
    started = time.time()
    async with (
        SlackStandIn(users=linked_users()) as slack,
        running_bot(config, slack, signing_secret, stop_timeout),
    ):
        if config.slack.mode == "socket":
            await slack.wait_for_socket_connection(timeout=15)
        else:
            slack_config = config.slack
            url = f"http://{slack_config.http_host}:{slack_config.http_port}/slack/events"
            await wait_until_listening(url)
        await wait_for_slurm_poll(config.database.path, after=started, acted_on=True)
        yield slack


def dms_about(slack: SlackStandIn, job_id: int) -> list[str]:
    """The texts of every message the stand-in accepted that names this job."""
    pattern = re.compile(rf"\bJob {job_id}\b")
    return [
        str(call.params.get("text"))
        for call in slack.calls_to("chat.postMessage")
        if call.ok and pattern.search(str(call.params.get("text")))
    ]


async def ask(slack: SlackStandIn, user: str, text: str) -> dict[str, Any]:
    """`/sky TEXT` from a linked test user over the stand-in: the answer's payload, or the
    one that follows it (an ack within 1 s may say "working on it")."""
    return await slack.slash_command_answer(
        command="/sky", text=text, user_id=SLACK_IDS[user], team_id=TEAM, timeout=10
    )
