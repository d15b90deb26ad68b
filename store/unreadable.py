"""Stored records that no longer decode: each costs only itself, and is named once.

A row written by another version of skybot, or edited by hand, must not fail every poll's
save or every reader's load (issue 26): the reader leaves it out, the save treats it as not
seen, and the log says which row it was, once per process rather than on every poll.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import msgspec

log = logging.getLogger(__name__)
R = TypeVar("R")

# What was named already (bounded: a store full of bad rows must not grow it forever).
_named: set[str] = set()
_NAMED_AT_MOST = 10_000


# What decoding a stored record raises when the text is not a record of that type.
UNREADABLE = (msgspec.DecodeError, msgspec.ValidationError, TypeError)


def readable(who: str, decode: Callable[[str], R], record: str) -> R | None:
    """The stored record decoded, or None (named once) if it does not decode."""
    try:
        return decode(record)
    except UNREADABLE as error:
        name_unreadable(who, error)
        return None


def name_unreadable(who: str, error: Exception) -> None:
    name_once(f"{who}: its stored record cannot be read ({error}); left out")


def name_once(message: str) -> None:
    """Log `message` unless this process logged it already."""
    if message in _named:
        return
    if len(_named) < _NAMED_AT_MOST:
        _named.add(message)
    log.warning("store: %s", message)
