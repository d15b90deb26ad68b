"""What action commands (link, submit, cancel, …) may use; read-only commands need none of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.config import Config
from handlers.identity import IdentityDirectory, RunnerCall
from store.writer import StoreWriter


@dataclass
class Services:
    config: Config
    identity: IdentityDirectory
    # call_runner bound to the configured sudo and runner paths.
    runner: RunnerCall
    # The submission queue, once submit is wired in.
    submissions: Any = None
    # The store's writer, for small per-user settings (`/sky notify`).
    writer: StoreWriter | None = None
