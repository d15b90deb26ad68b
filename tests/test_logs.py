import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.logs import QUIET_UNLESS_VERBOSE, JsonLines, configure_logging


def test_json_lines_carry_fields_and_the_exception() -> None:
    try:
        raise ValueError("bad poll")
    except ValueError:
        exc_info = sys.exc_info()
    record = logging.getLogger("scheduler.slurm.poller").makeRecord(
        "scheduler.slurm.poller",
        logging.WARNING,
        __file__,
        1,
        "slurm poll failed (next try in %d s)",
        (30,),
        exc_info,
    )
    entry = json.loads(JsonLines().format(record))
    assert entry["level"] == "WARNING"
    assert entry["logger"] == "scheduler.slurm.poller"
    assert entry["message"] == "slurm poll failed (next try in 30 s)"
    assert "ValueError: bad poll" in entry["exception"]
    assert entry["time"].endswith("+00:00")


_LOG_EVERY_LEVEL = """
import logging
from bot.logs import configure_logging
configure_logging(verbose=True)
log = logging.getLogger("skybot.test")
log.debug("debug line")
log.info("info line")
log.warning("warning line")
log.error("error line")
try:
    raise ValueError("boom")
except ValueError:
    log.exception("failed")
"""


def _stderr_of_a_process(tmp_path: Path, journal: str | None) -> list[str]:
    """Log one record per level in a fresh interpreter whose stderr is a file; with
    journal="match", JOURNAL_STREAM names that very file, as systemd names its stream."""
    path = tmp_path / "stderr"
    path.touch()
    stat = path.stat()
    env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
    if journal == "match":
        env["JOURNAL_STREAM"] = f"{stat.st_dev}:{stat.st_ino}"
    elif journal is not None:
        env["JOURNAL_STREAM"] = journal
    with path.open("wb") as err:
        subprocess.run(
            [sys.executable, "-c", _LOG_EVERY_LEVEL], stderr=err, env=env, check=True, timeout=60
        )
    return path.read_text().splitlines()


def test_lines_carry_their_syslog_priority_when_stderr_is_the_journal(tmp_path: Path) -> None:
    lines = _stderr_of_a_process(tmp_path, "match")
    assert lines[:4] == [
        "<7>DEBUG skybot.test: debug line",
        "<6>INFO skybot.test: info line",
        "<4>WARNING skybot.test: warning line",
        "<3>ERROR skybot.test: error line",
    ]
    # The traceback's every line is an error too, not info.
    assert lines[4] == "<3>ERROR skybot.test: failed"
    assert len(lines) > 5 and all(line.startswith("<3>") for line in lines[4:])
    assert lines[-1] == "<3>ValueError: boom"


@pytest.mark.parametrize("journal", [None, "1:2", "garbage"])
def test_no_prefix_unless_stderr_is_the_journal(tmp_path: Path, journal: str | None) -> None:
    lines = _stderr_of_a_process(tmp_path, journal)
    assert not any(line.startswith("<") for line in lines)
    assert any(line.endswith("ERROR skybot.test: error line") for line in lines)


@pytest.fixture
def restored_loggers() -> Iterator[None]:
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    levels = {name: logging.getLogger(name).level for name in QUIET_UNLESS_VERBOSE}
    yield
    root.setLevel(saved[0])
    root.handlers[:] = saved[1]
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@pytest.mark.usefixtures("restored_loggers")
def test_no_access_log_line_per_request_unless_verbose() -> None:
    """Issue 32: aiohttp's INFO line per Slack request cost as much as the answer."""
    logging.getLogger().handlers.clear()
    configure_logging(verbose=False)
    assert logging.getLogger().isEnabledFor(logging.INFO)
    assert not logging.getLogger("aiohttp.access").isEnabledFor(logging.INFO)
    logging.getLogger().handlers.clear()
    configure_logging(verbose=True)
    assert logging.getLogger("aiohttp.access").isEnabledFor(logging.INFO)
    assert logging.getLogger("handlers.slash").isEnabledFor(logging.DEBUG)
