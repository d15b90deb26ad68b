"""What `skybot run` secures before it starts anything: the database's instance lock, its
listening ports and the database itself (`claimed`). A second instance, a database it cannot
use or a taken port is then one clear line and an exit code, never a half-started bot that
polls Slurm without Slack, or two bots sending every DM twice. The codes that a restart cannot
fix are in the unit's RestartPreventExitStatus= (bot/install_files/skybot.service).

This module needs only the store: `skybot run` claims before it imports Slack's, aiohttp's and
the scheduler's libraries, so a refusal costs a third of a second, not a whole start.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import pwd
import socket
import sqlite3
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from bot import __version__
from bot.config import Config, database_path
from bot.exit_codes import (
    EXIT_ALREADY_RUNNING,
    EXIT_DATABASE_UNUSABLE,
    EXIT_PORT_UNAVAILABLE,
    EXIT_SCHEMA_TOO_NEW,
    EXIT_SLURM_TOKEN_UNSAFE,
)
from store.db import SCHEMA_VERSION, SchemaTooNewError
from store.writer import StoreWriter

log = logging.getLogger("skybot")


class StartupError(Exception):
    """Start-up cannot go on; the message is the whole story, in one line."""

    exit_code = 1


class PortUnavailable(StartupError):
    exit_code = EXIT_PORT_UNAVAILABLE


class AlreadyRunning(StartupError):
    exit_code = EXIT_ALREADY_RUNNING


class SchemaTooNew(StartupError):
    exit_code = EXIT_SCHEMA_TOO_NEW


class DatabaseUnusable(StartupError):
    exit_code = EXIT_DATABASE_UNUSABLE


class SlurmTokenUnsafe(StartupError):
    exit_code = EXIT_SLURM_TOKEN_UNSAFE


@dataclass
class Claim:
    """What start-up secured, held until the run ends."""

    writer: StoreWriter
    # Bound and listening, by purpose ("metrics", "http"); served once the bot starts.
    sockets: dict[str, socket.socket]


@contextlib.contextmanager
def claimed(config: Config) -> Iterator[Claim]:
    """The instance lock, then every port, then the database, each refused as StartupError;
    released in reverse, the lock last: no second instance opens the store before it is closed.
    First of all, a slurmrestd token for root or SlurmUser is refused (restd_identity.py)."""
    refuse_unsafe_slurm_tokens(config)
    with _instance_lock(database_path(config)), _listeners(config) as sockets:
        writer = open_store(database_path(config))
        log.info(starting_line(config))
        try:
            yield Claim(writer, sockets)
        finally:
            writer.close()


@contextlib.contextmanager
def _instance_lock(path: Path) -> Iterator[None]:
    if str(path) == ":memory:":
        yield
        return
    with InstanceLock(path):
        yield


@contextlib.contextmanager
def _listeners(config: Config) -> Iterator[dict[str, socket.socket]]:
    sockets: dict[str, socket.socket] = {}
    try:
        if config.metrics.port:
            sockets["metrics"] = bind_listener(config.metrics.host, config.metrics.port, "metrics")
        if config.slack.mode == "http":
            sockets["http"] = bind_listener(
                config.slack.http_host, config.slack.http_port, "Slack events (HTTP mode)"
            )
        yield sockets
    finally:
        for sock in sockets.values():
            sock.close()


def refuse_unsafe_slurm_tokens(config: Config) -> None:
    """SlurmTokenUnsafe if a slurmrestd cluster's token file holds a token that acts as anyone."""
    restd = [cluster for cluster in config.clusters if cluster.source == "slurmrestd"]
    if not restd:
        return  # nothing of the scheduler's is loaded for the other refusals
    from scheduler.slurm.restd_identity import slurm_conf_facts, unsafe_token_file

    for cluster in restd:
        refused = unsafe_token_file(cluster.token_file, slurm_conf_facts(cluster.slurm_conf))
        if refused is not None:
            raise SlurmTokenUnsafe(f"cluster {cluster.name}: {refused}")


def starting_line(config: Config) -> str:
    """Which skybot, on which schema, for which clusters: the first thing a log should say
    (open_store has migrated the database to SCHEMA_VERSION, or refused)."""
    clusters = ", ".join(
        f"{cluster.name} ({len(cluster.labs)} lab{'' if len(cluster.labs) == 1 else 's'})"
        for cluster in config.clusters
    )
    return (
        f"skybot {__version__} starting: database schema {SCHEMA_VERSION} "
        f"({database_path(config)}), clusters: {clusters}"
    )


def open_store(database: Path | str) -> StoreWriter:
    """The store's writer, or the start-up error that says in one line why not."""
    try:
        return StoreWriter(database)
    except SchemaTooNewError as error:
        raise SchemaTooNew(
            f"the database {database} has schema version {error.found}, newer than skybot "
            f"{__version__} knows ({error.supported}): a newer skybot wrote it. Install that "
            "newer skybot again, or restore a backup of the database taken before it ran"
        ) from None
    except (OSError, sqlite3.Error) as error:
        raise DatabaseUnusable(f"cannot use the database {database}: {_reason(error)}") from None


def _reason(error: OSError | sqlite3.Error) -> str:
    if isinstance(error, OSError):
        what = (error.strerror or str(error)).lower()
        where = f" ({error.filename})" if error.filename else ""
        return f"{what}{where}; {_who()}"
    return f"{error}; {_who()}"


def _who() -> str:
    """Which user needs the access, for the admin's chown."""
    try:
        name = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        name = str(os.geteuid())
    return f"skybot runs as {name}, which must be able to write the database and its directory"


class InstanceLock:
    """One `skybot run` per database, held for the lifetime, in two ways that both go when
    their holder dies, however it dies (so a crashed bot never leaves a stale lock):

    - an exclusive flock on `DB.lock`, beside the database: seen by every process that
      shares the file system, and it records the holder's pid;
    - a listening socket in the abstract namespace, named after the database's real path:
      no file, so deleting files (the lock file, the database itself) cannot defeat it.

    Not a lock on the database file: SQLite's own POSIX locks on it would be lost whenever
    any other descriptor of it is closed.
    """

    def __init__(self, database: Path) -> None:
        self.database = database
        self.path = database.with_name(database.name + ".lock")
        self._fd: int | None = None
        self._socket: socket.socket | None = None

    @property
    def socket_name(self) -> bytes:
        real = os.path.realpath(self.database).encode()
        return b"\0skybot-instance-" + hashlib.sha256(real).hexdigest()[:32].encode()

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o640)  # not inherited by children
        except OSError as error:
            raise DatabaseUnusable(
                f"cannot use the database directory {self.path.parent}: {_reason(error)}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise self._already_running(holder) from None
        try:
            self._socket = self._bind_name()
        except AlreadyRunning:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def _bind_name(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(self.socket_name)
            sock.listen(8)
        except OSError:
            sock.close()
            raise self._already_running(self._name_holder()) from None
        return sock

    def _name_holder(self) -> str:
        """The pid that holds the name, as the kernel tells a client that connects to it."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            try:
                probe.connect(self.socket_name)
                credentials = probe.getsockopt(
                    socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
                )
            except OSError:
                return "unknown"
        pid, _, _ = struct.unpack("3i", credentials)
        return str(pid)

    def _already_running(self, holder: str) -> AlreadyRunning:
        return AlreadyRunning(
            f"another skybot run (pid {holder}) already uses {self.database}; "
            "one instance per database"
        )

    def release(self) -> None:
        # The lock file is left in place: unlinking it lets a newcomer lock a different inode.
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> InstanceLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def bind_listener(host: str, port: int, purpose: str) -> socket.socket:
    """A listening TCP socket on host:port, or PortUnavailable saying which and why."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as error:
        raise PortUnavailable(f"cannot listen on {host}:{port} for {purpose}: {error}") from None
    try:
        # As aiohttp does: a restart may rebind while old connections sit in TIME_WAIT (Linux
        # still refuses a port another socket listens on).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except OSError as error:
        with contextlib.suppress(OSError):
            sock.close()
        reason = error.strerror or str(error)
        raise PortUnavailable(
            f"cannot listen on {host}:{port} for {purpose}: {reason.lower()}"
        ) from None
    return sock
