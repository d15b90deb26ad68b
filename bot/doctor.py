"""`skybot doctor`: check an installation end to end and say how to fix what is wrong.

Each check is a small function returning `Check`s; a failure always carries one sentence
telling the admin what to do, because "auth.test failed" alone sends them searching. The
checks look at the same things the bot uses (the config, the tokens against Slack, each Slurm
command the pollers run, the sudo rule and the runner, storage roots, the database), from the
service user's point of view where permissions matter: an admin usually runs this as root,
and root can read everything the bot cannot.

Secrets are never printed: messages are built from names and Slack's error codes, and
`redact` scrubs token values from anything that reaches the output anyway.
"""

from __future__ import annotations

import asyncio
import getpass
import importlib
import json
import os
import pkgutil
import pwd
import re
import stat
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Config, ConfigError, Secrets, database_path, load_config
from bot.scopes import scopes_needed
from scheduler.slurm_commands import SlurmCommandError, run_slurm, run_slurm_json

RUNUSER = "/usr/sbin/runuser"
SLACK_TIMEOUT_SECONDS = 15.0
SLURM_TIMEOUT_SECONDS = 10.0
SUDO_TIMEOUT_SECONDS = 10.0
INSTALL_RUNNER = "`skybot install runner sudoers` as root"
SLURM_FIX = (
    "Is slurmctld (and slurmdbd, for sacct/sacctmgr) reachable from this host, and is "
    "slurm.bin_dir the directory holding the Slurm commands?"
)


@dataclass(frozen=True)
class Check:
    """One line of the checklist. `fix` is empty when ok; `warning` is ok-but-unverified."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False


def passed(checks: Sequence[Check]) -> bool:
    return all(check.ok for check in checks)


def redact(text: str, secrets: Secrets) -> str:
    """Replace every secret value in `text`: the last guard before anything is printed."""
    for value in (secrets.bot_token, secrets.app_token, secrets.signing_secret):
        if value:
            text = text.replace(value, "[redacted]")
    return text


def format_check(check: Check) -> str:
    mark = "!" if check.warning else "✔" if check.ok else "✘"
    line = f"{mark} {check.name}: {check.detail}"
    return f"{line} — fix: {check.fix}" if check.fix else line


# -- running things as the service user ------------------------------------------------------


@dataclass(frozen=True)
class ServiceUser:
    """Who the bot runs as; commands whose answer depends on the user are run as them."""

    name: str

    @classmethod
    def current(cls) -> ServiceUser:
        return cls(getpass.getuser())

    @property
    def is_me(self) -> bool:
        return self.name == pwd.getpwuid(os.geteuid()).pw_name

    def prefix(self) -> list[str]:
        """The argv prefix that runs a command as this user (runuser needs root)."""
        return [] if self.is_me else [RUNUSER, "-u", self.name, "--"]


async def _run(argv: Sequence[str], timeout: float, stdin: bytes = b"") -> tuple[int, str]:
    """Run argv without a shell or a terminal, `stdin` as its input; (exit status,
    stdout+stderr). 127: cannot start."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            cwd="/",
            start_new_session=True,
        )
    except OSError as error:
        return 127, f"cannot run {argv[0]}: {error.strerror}"
    try:
        output, _ = await asyncio.wait_for(process.communicate(stdin), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        return 124, f"{argv[0]} did not answer within {timeout:g} s"
    return process.returncode or 0, output.decode(errors="replace")


def _user_problem(user: ServiceUser) -> Check | None:
    """A failed check when checks as `user` are impossible from here, else None."""
    try:
        pwd.getpwnam(user.name)
    except KeyError:
        return Check(
            "service user",
            False,
            f"there is no user {user.name!r}",
            "Create the service user (e.g. `useradd --system skybot`) or pass --service-user.",
        )
    if not user.is_me and os.geteuid() != 0:
        return Check(
            "service user",
            False,
            f"running as {getpass.getuser()}, cannot check as {user.name}",
            f"Run `skybot doctor` as {user.name}, or as root with --service-user {user.name}.",
        )
    return None


# -- 1. config ---------------------------------------------------------------------------------


def check_config(path: Path | None) -> tuple[Check, Config | None]:
    where = str(path) if path else "the built-in test-cluster config"
    try:
        config = load_config(path)
    except ConfigError as error:
        return Check(
            "config",
            False,
            str(error),
            f"Correct {where}; `skybot show config` prints every key, commented.",
        ), None
    return Check("config", True, f"{where} loads: {len(config.labs)} labs"), config


# -- 2. Slack tokens and scopes ----------------------------------------------------------------


def check_token_presence(config: Config, secrets: Secrets) -> Check:
    mode = config.slack.mode
    try:
        secrets.require_for(mode)
    except ConfigError as error:
        return Check(
            "tokens",
            False,
            str(error),
            "Set it in the service's environment (e.g. an EnvironmentFile for the systemd "
            "unit), then run the doctor in that same environment.",
        )
    names = ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN" if mode == "socket" else "SLACK_SIGNING_SECRET"]
    return Check("tokens", True, f"{' and '.join(names)} are set ({mode} mode)")


def _slack_error(error: Exception) -> str:
    if isinstance(error, SlackApiError):
        return str(error.response.get("error") or f"HTTP {error.response.status_code}")
    if isinstance(error, TimeoutError):
        return f"no answer within {SLACK_TIMEOUT_SECONDS:g} s"
    return type(error).__name__


def _header(headers: object, name: str) -> str | None:
    """A response header, case-insensitively (slack_sdk hands on aiohttp's headers)."""
    items = headers.items() if hasattr(headers, "items") else []
    return next((str(v) for k, v in items if str(k).lower() == name), None)


async def check_bot_token(config: Config, secrets: Secrets) -> list[Check]:
    """auth.test with the bot token, then its scopes from the x-oauth-scopes header."""
    from bot.app import web_client

    client = web_client(secrets)
    try:
        response = await asyncio.wait_for(client.auth_test(), SLACK_TIMEOUT_SECONDS)
    except Exception as error:  # any failure is the check's answer
        code = _slack_error(error)
        fix = (
            "SLACK_BOT_TOKEN is wrong or revoked: copy the Bot User OAuth Token (xoxb-…) from "
            "the app's OAuth & Permissions page."
            if code in ("invalid_auth", "not_authed", "token_revoked", "account_inactive")
            else "Check that this host can reach the Slack API (SLACK_API_URL if set)."
        )
        return [Check("slack auth", False, f"auth.test failed: {code}", fix)]
    auth = Check(
        "slack auth",
        True,
        f"auth.test OK: bot {response.get('user')!r} in team {response.get('team')!r}",
    )
    return [auth, _scope_check(config, _header(response.headers, "x-oauth-scopes"))]


def _scope_check(config: Config, header: str | None) -> Check:
    needed = scopes_needed(bool(config.identity.email_domain))
    if header is None:
        return Check(
            "slack scopes",
            True,
            "Slack sent no x-oauth-scopes header, so the scopes were not checked; skybot "
            f"needs {', '.join(needed)}",
            warning=True,
        )
    granted = {s.strip() for s in header.split(",") if s.strip()}
    missing = [scope for scope in needed if scope not in granted]
    if missing:
        why = "; ".join(f"{s}: {needed[s]}" for s in missing)
        return Check(
            "slack scopes",
            False,
            f"the bot token lacks {', '.join(missing)} ({why})",
            "Add the missing Bot Token Scopes on the app's OAuth & Permissions page, reinstall "
            "the app to the workspace, and use the new xoxb- token.",
        )
    return Check("slack scopes", True, f"the bot token has {', '.join(needed)}")


async def check_app_token(secrets: Secrets) -> Check:
    """apps.connections.open proves the app token works; the URL it returns is not used."""
    from bot.app import DEFAULT_SLACK_API_URL

    client = AsyncWebClient(
        token=secrets.app_token, base_url=secrets.api_url or DEFAULT_SLACK_API_URL
    )
    try:
        await asyncio.wait_for(
            client.apps_connections_open(app_token=secrets.app_token), SLACK_TIMEOUT_SECONDS
        )
    except Exception as error:  # any failure is the check's answer
        return Check(
            "socket mode",
            False,
            f"apps.connections.open failed: {_slack_error(error)}",
            "Enable Socket Mode for the app and set SLACK_APP_TOKEN to an app-level token "
            "(xapp-…) with the connections:write scope.",
        )
    return Check("socket mode", True, "apps.connections.open OK with SLACK_APP_TOKEN")


_CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{6,}")


async def _channel_named(client: AsyncWebClient, name: str) -> dict[str, Any] | None:
    """The channel called `name` among those the bot can see (public, or private with it)."""
    cursor = None
    while True:
        page = await client.conversations_list(
            types="public_channel,private_channel",
            exclude_archived=True,
            limit=1000,
            cursor=cursor,
        )
        for channel in page.get("channels") or []:
            if channel.get("name") == name:
                return dict(channel)
        cursor = (page.get("response_metadata") or {}).get("next_cursor")
        if not cursor:
            return None


async def check_alert_channel(config: Config, secrets: Secrets) -> Check:
    """Storage alerts go to slack.alert_channel; without chat:write.public the bot posts only
    where it is a member, so a channel it was never invited to loses every alert."""
    from bot.app import web_client

    wanted = config.slack.alert_channel
    shown = wanted if _CHANNEL_ID.fullmatch(wanted) else f"#{wanted.removeprefix('#')}"
    invite = f"In {shown}, type `/invite @skybot` (the bot posts only where it is a member)."
    client = web_client(secrets)
    try:
        if _CHANNEL_ID.fullmatch(wanted):
            answer = await asyncio.wait_for(
                client.conversations_info(channel=wanted), SLACK_TIMEOUT_SECONDS
            )
            channel: dict[str, Any] | None = dict(answer["channel"])
        else:
            lookup = _channel_named(client, wanted.removeprefix("#"))
            channel = await asyncio.wait_for(lookup, SLACK_TIMEOUT_SECONDS)
    except Exception as error:  # any failure is the check's answer
        code = _slack_error(error)
        if code == "channel_not_found":
            channel = None
        elif code == "missing_scope":
            return Check(
                "alert channel",
                False,
                f"cannot look up {shown}: the bot token lacks channels:read/groups:read",
                "Add the channels:read and groups:read Bot Token Scopes (`skybot show "
                "manifest`), reinstall the app and use the new xoxb- token.",
            )
        else:
            return Check(
                "alert channel",
                False,
                f"cannot look up {shown}: {code}",
                "Check that this host can reach the Slack API.",
            )
    if channel is None:
        return Check(
            "alert channel",
            False,
            f"{shown} does not exist, or is private and skybot is not in it",
            f"Set slack.alert_channel to an existing channel; {invite}",
        )
    name = f"#{channel.get('name')} ({channel.get('id')})"
    if channel.get("is_archived"):
        return Check(
            "alert channel",
            False,
            f"{name} is archived",
            "Unarchive it or set slack.alert_channel to a live channel.",
        )
    if not channel.get("is_member"):
        return Check("alert channel", False, f"skybot is not a member of {name}", invite)
    return Check("alert channel", True, f"{name} exists and skybot is a member")


async def check_slack(config: Config, secrets: Secrets) -> list[Check]:
    presence = check_token_presence(config, secrets)
    if not presence.ok:
        return [presence]
    token = await check_bot_token(config, secrets)
    checks = [presence, *token]
    if token[0].ok:
        checks.append(await check_alert_channel(config, secrets))
    if config.slack.mode == "socket":
        checks.append(await check_app_token(secrets))
    return checks


# -- 3. Slurm ----------------------------------------------------------------------------------


def _count(document: object, key: str) -> int:
    value = document.get(key) if isinstance(document, dict) else None
    return len(value) if isinstance(value, list) else 0


async def _slurm_check(
    config: Config, label: str, command: str, args: list[str], key: str
) -> Check:
    """Run one command the pollers run, the way they run it, with a short timeout."""
    timeout = min(config.slurm.command_timeout_seconds, SLURM_TIMEOUT_SECONDS)
    try:
        if key:
            document = await run_slurm_json(config.slurm.bin_dir, command, args, timeout)
            what = f"{_count(document, key)} {key}"
        else:
            raw = await run_slurm(config.slurm.bin_dir, command, args, timeout)
            what = f"{len(raw.splitlines())} associations"
    except SlurmCommandError as error:
        return Check("slurm", False, f"{label} failed: {error}", SLURM_FIX)
    return Check("slurm", True, f"{label} answered ({what})")


async def check_slurm(config: Config) -> list[Check]:
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 3600))
    commands: list[tuple[str, str, list[str], str]] = [
        ("squeue --json", "squeue", ["--all", "--json"], "jobs"),
        ("sinfo --json", "sinfo", ["--json"], "nodes"),
        ("sacct --json", "sacct", ["--json", "--allusers", f"--starttime={since}"], "jobs"),
        (
            "sacctmgr show assoc",
            "sacctmgr",
            ["--parsable2", "--noheader", "show", "associations", "format=account,user,grptres"],
            "",
        ),
    ]
    checks = await asyncio.gather(
        *(_slurm_check(config, *c) for c in commands), check_job_comments(config)
    )
    return [*checks, *await check_labs_in_slurm(config)]


async def _slurm_names(config: Config, command: str, args: list[str]) -> set[str]:
    timeout = min(config.slurm.command_timeout_seconds, SLURM_TIMEOUT_SECONDS)
    raw = await run_slurm(config.slurm.bin_dir, command, args, timeout)
    return {line.strip() for line in raw.decode(errors="replace").splitlines() if line.strip()}


async def check_labs_in_slurm(config: Config) -> list[Check]:
    """Each lab's partition must exist in Slurm (sinfo) and its account in the accounting
    database (sacctmgr): a typo there gives every /sky answer for that lab an empty lab."""
    try:
        partitions = await _slurm_names(config, "sinfo", ["--noheader", "--format=%R"])
        accounts = await _slurm_names(
            config, "sacctmgr", ["--parsable2", "--noheader", "show", "account", "format=account"]
        )
    except SlurmCommandError as error:
        fail = f"cannot list partitions and accounts: {error}"
        return [Check("slurm labs", False, fail, SLURM_FIX)]
    places = [(f"lab {lab.name}", "labs.", lab.partition, lab.account) for lab in config.labs]
    overcap = ("overcap", "slurm.overcap_", config.slurm.overcap_partition)
    places.append((*overcap, config.slurm.overcap_account))
    return [judge_lab(*place, partitions, accounts) for place in places]


def judge_lab(
    what: str, key: str, partition: str, account: str, partitions: set[str], accounts: set[str]
) -> Check:
    """`key` says where the config sets them: "labs." or "slurm.overcap_"."""
    name = f"slurm {what}"
    if partition not in partitions:
        return Check(
            name,
            False,
            f"Slurm has no partition {partition!r}",
            f"Correct {key}partition for {what} (Slurm has {', '.join(sorted(partitions))}), "
            f"or add PartitionName={partition} to slurm.conf.",
        )
    if account not in accounts:
        return Check(
            name,
            False,
            f"the accounting database has no account {account!r}",
            f"Correct {key}account for {what} (Slurm has {', '.join(sorted(accounts))}), or "
            f"`sacctmgr add account {account}`.",
        )
    return Check(name, True, f"partition {partition} and account {account} exist")


async def check_job_comments(config: Config) -> Check:
    """Chat submissions are tagged with a job comment; after a crash mid-submit, skybot looks
    for the tag to avoid submitting twice, and a job that already ended is only found if
    slurmdbd stores comments."""
    timeout = min(config.slurm.command_timeout_seconds, SLURM_TIMEOUT_SECONDS)
    try:
        raw = await run_slurm(config.slurm.bin_dir, "scontrol", ["show", "config"], timeout)
    except SlurmCommandError as error:
        return Check("job comments", False, f"scontrol show config failed: {error}", SLURM_FIX)
    flags = next(
        (
            line.partition("=")[2].strip()
            for line in raw.decode(errors="replace").splitlines()
            if line.split("=", 1)[0].strip() == "AccountingStoreFlags"
        ),
        "",
    )
    if "job_comment" in flags:
        return Check("job comments", True, "slurmdbd stores job comments (job_comment)")
    return Check(
        "job comments",
        True,
        f"AccountingStoreFlags is {flags or 'unset'}: sacct shows no job comments, so after a "
        "crash mid-submit a chat submission whose job already ended could be submitted again",
        "Add AccountingStoreFlags=job_comment to slurm.conf and restart slurmctld.",
        warning=True,
    )


# -- 4. the sudo rule --------------------------------------------------------------------------

# "(%skybot-users) NOPASSWD: /usr/local/libexec/skybot-runner """ in `sudo -l` output.
_RULE = re.compile(r"^\s*\(([^)]*)\)\s*(.*)$")
_TAGS = re.compile(
    r"\b(?:NO)?(?:PASSWD|EXEC|SETENV|LOG_INPUT|LOG_OUTPUT|MAIL|FOLLOW|INTERCEPT):\s*"
)


def parse_sudo_rules(listing: str) -> list[tuple[str, list[str]]]:
    """(run-as list, commands) for each rule line `sudo -l` printed."""
    rules = []
    for line in listing.splitlines():
        match = _RULE.match(line)
        if match:
            commands = [c.strip() for c in _TAGS.sub("", match.group(2)).split(",") if c.strip()]
            rules.append((match.group(1).strip(), commands))
    return rules


def judge_sudo_rules(rules: list[tuple[str, list[str]]], runner: str) -> tuple[bool, str]:
    """Whether the rules allow exactly the runner, and nothing like ALL."""
    too_broad = [
        f"({runas}) {', '.join(cmds)}"
        for runas, cmds in rules
        if "ALL" in cmds or any(part.strip() in ("ALL", "ALL : ALL") for part in runas.split(","))
    ]
    if too_broad:
        return False, f"the rule is far too broad: {'; '.join(too_broad)}"
    runner_rules = [
        (runas, cmd) for runas, cmds in rules for cmd in cmds if cmd.split()[0] == runner
    ]
    if not runner_rules:
        return False, f"{runner} is not among the commands it may run"
    runas, cmd = runner_rules[0]
    return True, f"may run {cmd} as ({runas})"


async def check_sudo(config: Config, user: ServiceUser) -> Check:
    """`sudo -l -n` as the service user must list the runner, and never ALL."""
    fix = (
        f"Install the sudoers rule ({INSTALL_RUNNER}); it must let {user.name} run "
        f"{config.runner.path} with no arguments as %skybot-users, never ALL."
    )
    if user.name == "root":
        return Check(
            "sudo rule",
            False,
            "the service user is root",
            "Run skybot as its own unprivileged service user (skybot), never as root.",
        )
    argv = [*user.prefix(), config.runner.sudo, "-l", "-n"]
    status, output = await _run(argv, SUDO_TIMEOUT_SECONDS)
    if status != 0:
        last = output.strip().splitlines()[-1] if output.strip() else f"exit status {status}"
        return Check("sudo rule", False, f"sudo -l -n as {user.name} failed: {last}", fix)
    ok, detail = judge_sudo_rules(parse_sudo_rules(output), config.runner.path)
    return Check("sudo rule", ok, f"{user.name} {detail}", "" if ok else fix)


# -- 5. the runner file ------------------------------------------------------------------------


def _unsafe(path: Path, info: os.stat_result) -> str | None:
    if info.st_uid != 0:
        return f"{path} is owned by uid {info.st_uid}, not root"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def check_runner(config: Config) -> Check:
    """Whoever can change the runner, or a directory above it, acts as every user."""
    runner = Path(config.runner.path)
    fix = f"Reinstall the runner ({INSTALL_RUNNER}): root:root 0755 in root-owned directories."
    try:
        info = runner.lstat()
    except OSError as error:
        return Check("runner", False, f"{runner}: {error.strerror}", fix)
    if not stat.S_ISREG(info.st_mode):
        return Check("runner", False, f"{runner} is not a regular file", fix)
    problem = _unsafe(runner, info)
    if problem is None and not info.st_mode & stat.S_IXUSR:
        problem = f"{runner} is not executable"
    for parent in runner.parents:
        if problem is not None:
            break
        problem = _unsafe(parent, parent.stat())
    if problem:
        return Check("runner", False, problem, fix)
    mode = stat.S_IMODE(info.st_mode)
    return Check("runner", True, f"{runner} is root-owned, mode {mode:04o}, in root-owned dirs")


# -- 6. storage roots --------------------------------------------------------------------------


async def _listable_by(path: str, user: ServiceUser) -> bool:
    if user.is_me:
        try:
            with os.scandir(path):
                return True
        except OSError:
            return False
    status, _ = await _run(
        [*user.prefix(), "/usr/bin/test", "-r", path, "-a", "-x", path], SUDO_TIMEOUT_SECONDS
    )
    return status == 0


async def check_storage_root(lab: str, root: str, user: ServiceUser) -> Check:
    name = f"storage {lab}"
    if not os.path.exists(root):
        return Check(
            name,
            False,
            f"{root} does not exist",
            f"Mount the filesystem at {root}, or correct the lab's storage_roots.",
        )
    if not os.path.isdir(root):
        return Check(
            name,
            False,
            f"{root} is not a directory",
            f"Point the lab's storage_roots at the directory, not {root}.",
        )
    if not await _listable_by(root, user):
        return Check(
            name,
            False,
            f"{root} cannot be listed by {user.name}",
            f"Grant {user.name} read and search access to {root} (e.g. a group or an "
            "ACL), so the weekly disk-usage.txt reports can be read.",
        )
    stats = os.statvfs(root)
    used = 100 * (1 - stats.f_bfree / stats.f_blocks) if stats.f_blocks else 0.0
    return Check(name, True, f"{root} is readable by {user.name} ({used:.0f}% full)")


async def check_storage(config: Config, user: ServiceUser) -> list[Check]:
    checks = [
        await check_storage_root(lab.name, root, user)
        for lab in config.labs
        for root in lab.storage_roots
    ]
    checks = checks or [Check("storage", True, "no storage roots configured", warning=True)]
    if config.images.dir:
        checks.append(await check_image_dir(config.images.dir, user))
    return checks


async def check_image_dir(path: str, user: ServiceUser) -> Check:
    """`/sky images` lists this directory; "" in the config turns it off."""
    fix = (
        f"Point images.dir at the directory of *.sqsh images users run, make it listable by "
        f'{user.name}, or set images.dir = "" to turn /sky images off.'
    )
    if not os.path.isdir(path):
        return Check("images", False, f"{path} is not a directory", fix)
    if not await _listable_by(path, user):
        return Check("images", False, f"{path} cannot be listed by {user.name}", fix)
    count = sum(1 for name in os.listdir(path) if name.endswith(".sqsh"))
    return Check("images", True, f"{path} is readable by {user.name} ({count} images)")


# -- 7. the database ---------------------------------------------------------------------------


async def _writable_by(path: Path, user: ServiceUser) -> bool:
    if user.is_me:
        return os.access(path, os.W_OK | os.X_OK)
    status, _ = await _run(
        [*user.prefix(), "/usr/bin/test", "-w", str(path), "-a", "-x", str(path)],
        SUDO_TIMEOUT_SECONDS,
    )
    return status == 0


async def check_database(config: Config, user: ServiceUser) -> Check:
    """The database and its directory must be writable by the service user (WAL keeps files
    beside the db). The doctor never creates or opens it: run as root, SQLite would leave
    root-owned files (the db, or its -wal/-shm even for a read-only open) the bot cannot write.
    """
    file = database_path(config)
    directory = next((p for p in (file.parent, *file.parent.parents) if p.exists()), Path("/"))
    if not await _writable_by(directory, user):
        return Check(
            "database",
            False,
            f"{directory} is not writable by {user.name}",
            f"Create {file.parent} owned by {user.name} (e.g. systemd's "
            "StateDirectory=skybot, or `install -d -o skybot /var/lib/skybot`).",
        )
    if not file.exists():
        return Check("database", True, f"{file} does not exist yet; {user.name} can create it")
    for path in (file, *(Path(f"{file}{suffix}") for suffix in ("-wal", "-shm"))):
        if path.exists() and not await _file_writable_by(path, user):
            return Check(
                "database",
                False,
                f"{path} is not writable by {user.name}",
                f"chown {user.name} {file} {file}-wal {file}-shm (those that exist).",
            )
    return _judge_header(file)


async def _file_writable_by(path: Path, user: ServiceUser) -> bool:
    if user.is_me:
        return os.access(path, os.W_OK)
    status, _ = await _run([*user.prefix(), "/usr/bin/test", "-w", str(path)], SUDO_TIMEOUT_SECONDS)
    return status == 0


def _judge_header(file: Path) -> Check:
    """WAL mode and the schema version, from the 100-byte header of the SQLite file format
    (sqlite.org/fileformat.html): bytes 18-19 are 2 in WAL mode, 60-63 the user_version."""
    from store.db import SCHEMA_VERSION

    try:
        with file.open("rb") as db:
            header = db.read(100)
    except OSError as error:
        return Check("database", False, f"{file}: {error.strerror}", "Check the file and disk.")
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return Check(
            "database",
            False,
            f"{file} is not a SQLite database",
            "Point database.path at skybot's database, or move the file aside to start afresh.",
        )
    version = int.from_bytes(header[60:64], "big")
    if version > SCHEMA_VERSION:
        return Check(
            "database",
            False,
            f"{file} has schema {version}, newer than this skybot's {SCHEMA_VERSION}",
            "Run the newer skybot that wrote it.",
        )
    if header[18:20] != b"\x02\x02":
        return Check(
            "database",
            False,
            f"{file} is not in WAL mode",
            "Put the database on a local filesystem (WAL does not work over NFS).",
        )
    return Check("database", True, f"{file} is writable, schema {version}/{SCHEMA_VERSION}, WAL")


# -- 8. the installed package ------------------------------------------------------------------

# The packages `skybot run` is made of (pyproject.toml finds the same ones).
PRODUCT_PACKAGES = ("bot", "handlers", "scheduler", "store", "core")


def check_package() -> Check:
    """Import every module of the installed skybot, as `skybot run` eventually will: a wheel
    that left a package out fails here, not at the bot's first command."""
    from bot import __version__
    from bot.install import SHIPPED, shipped_text

    failed: list[str] = []
    count = 0
    for top in PRODUCT_PACKAGES:
        try:
            package = importlib.import_module(top)
        except Exception as error:  # reported, not raised: that is the check
            failed.append(f"{top} ({type(error).__name__}: {error})")
            continue
        walk = pkgutil.walk_packages(package.__path__, f"{top}.", onerror=failed.append)
        for module in walk:
            count += 1
            try:
                importlib.import_module(module.name)
            except Exception as error:  # reported, not raised: that is the check
                failed.append(f"{module.name} ({type(error).__name__}: {error})")
    for name in SHIPPED:
        try:
            shipped_text(name)
        except OSError as error:
            failed.append(f"the shipped {name} file ({error.strerror})")
    where = Path(importlib.import_module("bot").__file__ or "bot").parent.parent
    # A module the install lacks can still import from another copy (an old editable install,
    # a checkout on sys.path): the service would run a mixture.
    failed += [
        f"{name} (imported from {module.__file__}, outside this install)"
        for name, module in sorted(sys.modules.items())
        if name.partition(".")[0] in PRODUCT_PACKAGES
        and (file := getattr(module, "__file__", None))
        and not Path(file).is_relative_to(where)
    ]
    if failed:
        return Check(
            "package",
            False,
            f"skybot {__version__} in {where} is incomplete: {'; '.join(failed)}",
            "Reinstall skybot from a complete wheel (`pip install --force-reinstall "
            "skybot-VERSION.whl` into the service's venv).",
        )
    return Check("package", True, f"skybot {__version__}: all {count} modules import from {where}")


# -- 9. the runner's version -------------------------------------------------------------------


async def check_runner_version(config: Config, user: ServiceUser) -> Check:
    """The installed runner must come from this skybot. Run directly (not through sudo), as
    the service user: a `version` request is answered before any identity check."""
    from bot import __version__

    fix = "Run `skybot install runner` as root, with the skybot that runs the bot."
    status, output = await _run(
        [*user.prefix(), config.runner.path], SUDO_TIMEOUT_SECONDS, stdin=b'{"action":"version"}'
    )
    try:
        answer = json.loads(output)
        found = answer.get("version") if answer.get("ok") else None
    except (ValueError, AttributeError):
        found = None
    if found is None:
        last = output.strip().splitlines()[-1:] or [f"exit status {status}"]
        return Check(
            "runner version",
            False,
            f"{config.runner.path} did not say its version (older than 0.1.0?): {last[0][:200]}",
            fix,
        )
    if found != __version__:
        return Check(
            "runner version",
            False,
            f"the runner is skybot {found}, the bot is {__version__}: /sky submit, cancel and "
            "link would be refused",
            fix,
        )
    return Check("runner version", True, f"the runner is skybot {found}, like the bot")


# -- all of it ---------------------------------------------------------------------------------


async def run_doctor(config_file: Path | None, secrets: Secrets, user: ServiceUser) -> list[Check]:
    """Every check, in the order an admin would fix them; stops early only without a config."""
    config_check, config = check_config(config_file)
    if config is None:
        return [config_check]
    checks = [config_check, check_package()]
    checks += [*await check_slack(config, secrets), *await check_slurm(config)]
    problem = _user_problem(user)
    if problem is not None:
        return [*checks, problem, check_runner(config)]
    checks += [await check_sudo(config, user), check_runner(config)]
    checks.append(await check_runner_version(config, user))
    checks += await check_storage(config, user)
    checks.append(await check_database(config, user))
    return checks
