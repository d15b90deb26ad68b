"""The `skybot` command line: run the bot, try it in a console, poll once, check a config
or a whole installation (doctor), install the runner, sudo rule, config and unit (install)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import TypeAlias

from bot import __version__
from bot.config import DEFAULT_CONFIG_PATH, Config, ConfigError, Secrets, load_config
from bot.exit_codes import EXIT_CONFIG
from bot.install import DEFAULT_PYTHON, SHIPPED, TARGETS
from bot.logs import configure_logging, print_refusal

log = logging.getLogger("skybot")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(args.verbose, args.log_json)
    if args.command in ("install", "show"):
        from bot.install import install

        if args.command == "show":
            return _show(args)
        unknown = sorted(set(args.targets) - set(TARGETS))
        if unknown:
            print(
                f"skybot install: unknown target(s) {', '.join(unknown)}; expected "
                f"{', '.join(TARGETS)}",
                file=sys.stderr,
            )
            return EXIT_CONFIG
        return install(args.targets, args.python, Path(args.root))
    if args.command == "doctor":
        return _doctor(config_path(args.config), args.service_user)
    if args.command == "backup":
        return _backup(config_path(args.config), Path(args.destination))
    if args.command == "restore":
        return _restore(config_path(args.config), Path(args.backup))
    try:
        config = load_config(config_path(args.config))
        if args.command == "run":
            return _run(config)
        if args.command == "console":
            from bot.console import run_console

            return asyncio.run(run_console(config, args.as_user))
        if args.command == "poll":
            return asyncio.run(_poll(config, args.cycles))
        if args.command == "check-config":
            print(f"config OK: {len(config.labs)} labs, database {config.database.path}")
            return 0
    except ConfigError as error:
        print_refusal(f"config error: {error}")
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130
    return 0


def _run(config: Config) -> int:
    """The bot until SIGTERM (0); a config error is 2; a taken port 1, another instance on the
    same database 3, a database schema newer than this skybot 4, a database it cannot use 5
    (bot/startup.py), each as one line on stderr at priority err. Anything else that stops
    it is logged at priority crit, with its traceback, and exits 1."""
    secrets = Secrets.from_environment()
    secrets.require_for(config.slack.mode)
    from bot.startup import StartupError, claimed

    try:
        with claimed(config) as claim:
            # Slack's, aiohttp's and the scheduler's libraries load only once nothing refuses.
            from bot.service import run_claimed

            asyncio.run(run_claimed(config, secrets, claim))
    except StartupError as error:
        print_refusal(str(error))
        return error.exit_code
    except Exception as error:
        log.critical("skybot stopped: %s", error, exc_info=True)
        return 1
    return 0


def _show(args: argparse.Namespace) -> int:
    """A shipped file; the manifest for the configuration's scopes (--config, else as `run`)."""
    from bot.install import show

    try:
        config = load_config(config_path(args.config)) if args.name == "manifest" else None
    except ConfigError as error:
        print(f"skybot: config error: {error}", file=sys.stderr)
        return EXIT_CONFIG
    return show(args.name, args.http_url, config)


def _backup(path: Path | None, destination: Path) -> int:
    """A consistent copy of the database while the bot runs (README: "Backup and restore")."""
    from bot.config import database_path
    from store.backup import BackupError, backup_database

    try:
        result = backup_database(database_path(load_config(path)), destination)
    except ConfigError as error:
        print(f"skybot: config error: {error}", file=sys.stderr)
        return EXIT_CONFIG
    except BackupError as error:
        print(f"skybot backup: {error}", file=sys.stderr)
        return 1
    print(
        f"backed up schema {result.schema_version} to {result.path} ({result.size_bytes:,} bytes)"
    )
    return 0


def _restore(path: Path | None, backup: Path) -> int:
    """The backup in place of the database, with the bot stopped (README: "Backup and
    restore"); DMs the bot that ran past the backup may have sent are checked in Slack first."""
    import time

    from bot.config import database_path
    from bot.startup import InstanceLock, StartupError
    from store.backup import RESTORE_RECHECK_SECONDS, BackupError, restore_database

    try:
        database = database_path(load_config(path))
    except ConfigError as error:
        print(f"skybot: config error: {error}", file=sys.stderr)
        return EXIT_CONFIG
    lock = InstanceLock(database)
    try:
        lock.acquire()
    except StartupError as error:
        print(f"skybot restore: {error}: stop it first (systemctl stop skybot)", file=sys.stderr)
        return error.exit_code
    try:
        kept = restore_database(backup, database, time.time())
    except BackupError as error:
        print(f"skybot restore: {error}", file=sys.stderr)
        return 1
    finally:
        lock.release()
    replaced = f"; the database it replaced is {kept}" if kept else ""
    print(
        f"restored {backup} into {database}{replaced}. Start the bot now: for the next "
        f"{RESTORE_RECHECK_SECONDS / 60:.0f} minutes each DM is first looked for in Slack, so "
        "none that the bot sent after the backup is sent twice"
    )
    return 0


def config_path(given: str | None) -> Path | None:
    """--config, else $SKYBOT_CONFIG, else /etc/skybot/skybot.toml if present, else built-in."""
    if given:
        return Path(given)
    if os.environ.get("SKYBOT_CONFIG"):
        return Path(os.environ["SKYBOT_CONFIG"])
    return DEFAULT_CONFIG_PATH if DEFAULT_CONFIG_PATH.exists() else None


def _doctor(path: Path | None, service_user: str | None) -> int:
    """Print the checklist; 0 if everything passed, 1 otherwise (a bad config is a failure)."""
    from bot.doctor import run_doctor
    from bot.doctor.checklist import format_check, passed, redact
    from bot.doctor.service_user import ServiceUser

    secrets = Secrets.from_environment()
    user = ServiceUser(service_user) if service_user else ServiceUser.current()
    # The checklist is the doctor's whole output: slack_sdk's own retry and connection lines
    # would land between its checks, and each failure is already a check with its fix.
    logging.getLogger("slack_sdk").setLevel(logging.CRITICAL)
    logging.getLogger("slack_bolt").setLevel(logging.CRITICAL)
    checks = asyncio.run(run_doctor(path, secrets, user))
    for check in checks:
        print(redact(format_check(check), secrets))
    ok = passed(checks)
    failures = sum(not check.ok for check in checks)
    print("all checks passed" if ok else f"{failures} check(s) failed")
    return 0 if ok else 1


async def _poll(config: Config, cycles: int) -> int:
    from bot.config import database_path
    from scheduler.slurm.poller import SlurmPoller
    from scheduler.storage_poller import StoragePoller
    from store.clusters import adopt_unnamed_rows
    from store.snapshots import load_snapshot
    from store.writer import StoreWriter

    writer = StoreWriter(database_path(config))
    cluster = config.default_cluster.name
    await writer.run(adopt_unnamed_rows, cluster)
    slurm = SlurmPoller(config, writer, cluster=cluster)
    try:
        ok = await slurm.poll_caps() and await StoragePoller(config, writer, cluster=cluster).poll()
        ok = await slurm.poll_limits() and ok
        for _ in range(cycles):
            ok = await slurm.poll_jobs() and ok
        snapshot = await writer.run(load_snapshot, config.default_cluster.name)
    finally:
        await slurm.close()
        writer.close()
    print(
        f"{len(snapshot.jobs)} jobs, {len(snapshot.nodes)} nodes, {len(snapshot.caps)} caps, "
        f"{len(snapshot.directories)} directories, {len(snapshot.filesystems)} filesystems"
    )
    for status in snapshot.status.values():
        if status.failing:
            print(f"{status.source}: FAILING: {status.error}")
    return 0 if ok else 1


def _parser() -> argparse.ArgumentParser:
    logging_flags, common = _shared_flags()
    parser = argparse.ArgumentParser(prog="skybot", description=__doc__)
    parser.add_argument("--version", action="version", version=f"skybot {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser(
        "run", parents=[common], help="run the bot: pollers plus Slack (Socket Mode or HTTP)"
    )
    console = sub.add_parser(
        "console", parents=[common], help="type /sky commands locally, no Slack needed"
    )
    console.add_argument("--as", dest="as_user", help="act as this cluster user")
    poll = sub.add_parser(
        "poll", parents=[common], help="poll Slurm and storage into the store, then exit"
    )
    poll.add_argument("--cycles", type=int, default=1, help="Slurm poll cycles (default 1)")
    sub.add_parser("check-config", parents=[common], help="validate the config and exit")
    doctor = sub.add_parser(
        "doctor",
        parents=[common],
        help="check config, Slack tokens, Slurm, sudo rule, runner, storage and database",
    )
    doctor.add_argument(
        "--service-user",
        help="check sudo, storage and database access as this user (default: the current "
        "user; checking as another user needs root)",
    )
    _add_backup_and_restore(sub, common)
    _add_install(sub, logging_flags)
    _add_show(sub, common)
    return parser


def _shared_flags() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The logging flags every command takes, and those plus --config."""
    logging_flags = argparse.ArgumentParser(add_help=False)
    logging_flags.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    logging_flags.add_argument(
        "--log-json", action="store_true", help="log one JSON object per line (for collectors)"
    )
    common = argparse.ArgumentParser(add_help=False, parents=[logging_flags])
    common.add_argument(
        "--config",
        help=f"TOML config file (default: $SKYBOT_CONFIG, {DEFAULT_CONFIG_PATH} if it exists, "
        "or the built-in config for the local test cluster)",
    )
    return logging_flags, common


# argparse names no public type for it.
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _add_backup_and_restore(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    backup = sub.add_parser(
        "backup",
        parents=[common],
        help="copy the database while the bot runs (SQLite's online backup) to a new file",
    )
    backup.add_argument("destination", help="the new file to write (never overwritten)")
    restore = sub.add_parser(
        "restore",
        parents=[common],
        help="with the bot stopped: put a backup in place of the database (kept beside it)",
    )
    restore.add_argument("backup", help="a file `skybot backup` wrote")


def _add_install(sub: Subcommands, logging_flags: argparse.ArgumentParser) -> None:
    install = sub.add_parser(
        "install",
        parents=[logging_flags],
        help="as root: put the runner, sudoers rule, example config and systemd unit in place "
        "from this installed skybot (idempotent)",
    )
    install.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help=f"any of {', '.join(TARGETS)} (default: all, in that order)",
    )
    install.add_argument(
        "--python",
        default=DEFAULT_PYTHON,
        help="the runner's interpreter: the distribution's own, root-owned python3, never a "
        f"virtualenv's (default {DEFAULT_PYTHON})",
    )
    install.add_argument(
        "--root", default="/", help="install below this directory instead of / (staging)"
    )


def _add_show(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    show = sub.add_parser(
        "show",
        parents=[common],
        help="print a file shipped with skybot (e.g. the Slack app manifest to paste)",
    )
    show.add_argument("name", choices=sorted(SHIPPED), help="which file")
    show.add_argument(
        "--http-url",
        metavar="URL",
        help="the manifest for HTTP mode: Socket Mode off, and commands, button clicks and "
        "events sent to URL (https://HOST/slack/events)",
    )


if __name__ == "__main__":
    sys.exit(main())
