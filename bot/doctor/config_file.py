"""The config file: every other check needs it, so the doctor stops here when it is wrong."""

from __future__ import annotations

from pathlib import Path

from bot.config import Config, ConfigError, load_config
from bot.doctor.checklist import Check


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
