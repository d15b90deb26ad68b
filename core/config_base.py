"""What every table of skybot.toml is built from: the immutable Section, the number and text
types with their bounds, and the one error a bad file becomes. Pure.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta


class ConfigError(Exception):
    """A configuration problem, phrased as one line for the operator."""


Seconds = Annotated[float, Meta(gt=0)]
NonNegative = Annotated[float, Meta(ge=0)]
NonNegativeInt = Annotated[int, Meta(ge=0)]
PositiveInt = Annotated[int, Meta(ge=1)]
NonEmpty = Annotated[str, Meta(min_length=1)]


class Section(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A config table: immutable, and a key it does not know is an error, not ignored."""


def one_of(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{key}: {value!r} is not one of {', '.join(allowed)}")
