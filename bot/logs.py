"""Log set-up: readable lines for a terminal, one JSON object per line for log collectors."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonLines(logging.Formatter):
    """One JSON object per record, so the journal or a collector can filter on fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(verbose: bool = False, json_lines: bool = False) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLines() if json_lines else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler])
