"""Log set-up: readable lines for a terminal, one JSON object per line for log collectors,
and, when stderr is the journal, each line's syslog priority for journald."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TextIO

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The journal stamps every line itself.
JOURNAL_FORMAT = "%(levelname)s %(name)s: %(message)s"
QUIET_UNLESS_VERBOSE = ("apscheduler", "aiohttp.access")


class JsonLines(logging.Formatter):
    """One JSON object per record, so the journal or a collector can filter on fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        cluster = getattr(record, "cluster", "")
        if cluster:
            # Logged while working for a cluster (scheduler/log_cluster.py): a field to filter on.
            entry["cluster"] = cluster
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def syslog_priority(level: int) -> int:
    """crit 2, err 3, warning 4, info 6, debug 7 (syslog(3)), for Python's levels."""
    if level >= logging.CRITICAL:
        return 2
    if level >= logging.ERROR:
        return 3
    if level >= logging.WARNING:
        return 4
    if level >= logging.INFO:
        return 6
    return 7


class JournalPriorities(logging.Formatter):
    """Starts every line with `<N>`, the record's syslog priority: journald reads it as the
    entry's PRIORITY (sd-daemon(3); SyslogLevelPrefix= is on by default) and strips it. Every
    line of a traceback gets it, since the journal takes each line as one entry."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self._inner = inner

    def format(self, record: logging.LogRecord) -> str:
        prefix = f"<{syslog_priority(record.levelno)}>"
        return "\n".join(prefix + line for line in self._inner.format(record).splitlines())


def stderr_is_journal(environ: Mapping[str, str] = os.environ, stream: TextIO = sys.stderr) -> bool:
    """systemd sets JOURNAL_STREAM=DEVICE:INODE for a service whose stderr is the journal
    (systemd.exec(5)); a match with stderr's own means our lines reach journald as they are."""
    try:
        device, inode = (int(part) for part in environ.get("JOURNAL_STREAM", "").split(":"))
        stat = os.fstat(stream.fileno())
    except (ValueError, OSError, AttributeError):
        return False
    return (stat.st_dev, stat.st_ino) == (device, inode)


def print_refusal(message: str, stream: TextIO | None = None) -> None:
    """Why skybot will not start, as one line on stderr: `skybot: MESSAGE`, at priority err
    when stderr is the journal (so `journalctl -p err` shows it)."""
    stream = stream or sys.stderr
    prefix = f"<{syslog_priority(logging.ERROR)}>" if stderr_is_journal(stream=stream) else ""
    print(f"{prefix}skybot: {message}", file=stream, flush=True)


def configure_logging(verbose: bool = False, json_lines: bool = False) -> None:
    handler = logging.StreamHandler()
    journal = stderr_is_journal()
    formatter = (
        JsonLines() if json_lines else logging.Formatter(JOURNAL_FORMAT if journal else TEXT_FORMAT)
    )
    handler.setFormatter(JournalPriorities(formatter) if journal else formatter)
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler])
    # Without --verbose, only warnings from two chatty loggers: APScheduler says "Running
    # job …" and "… executed successfully" at INFO for every poll, several lines every 15 s;
    # aiohttp's access log writes a line per Slack request, which cost about as much as
    # answering it. Who asked what is logged per command at DEBUG (handlers.slash) and
    # counted by subcommand (skybot_commands); `--verbose` brings both kinds of line back.
    for chatty in QUIET_UNLESS_VERBOSE:
        logging.getLogger(chatty).setLevel(logging.NOTSET if verbose else logging.WARNING)
