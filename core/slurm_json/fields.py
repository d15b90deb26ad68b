"""How Slurm writes a value: numbers (plain, wrapped, or sentinels), strings, lists; and
`Fields`, typed access to one raw record where a bad field becomes a warning, never an error."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import msgspec

from core.slurm_decode import SlurmNumber

T = TypeVar("T")


# Slurm's "no value" / "infinite" sentinels for 32-bit fields; 22.05 sometimes prints them raw.
_NO_VAL32 = 0xFFFFFFFE


# Counts (GPUs in a spec or TRES entry) at or above this are not real; rejecting them here
# keeps every number a record carries within SQLite's 64-bit integers, whatever sums follow.
MAX_COUNT = 1 << 31


class SlurmJsonError(ValueError):
    """The document as a whole is not Slurm JSON of the expected kind."""


@dataclass(slots=True)
class ParseResult(Generic[T]):
    """Records parsed from one document, plus a warning per record that was odd or skipped."""

    records: list[T] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class BadField(ValueError):
    """A single field has a value of a shape no Slurm version produces."""


_INT_TEXT = re.compile(r"\s*-?\d+\s*")


def as_number(value: object) -> int | None:
    """An integer from any Slurm spelling; None for null, unset or infinite.

    Handles plain ints (22.05), `{"set", "infinite", "number"}` structs (23.02+) and digit
    strings (some 23.x string fields).
    """
    # `type(...) is int` rather than isinstance: bool is an int subclass but not a number here.
    if type(value) is int:
        return value
    if value is None:
        return None
    if type(value) is SlurmNumber:  # the slim decode's form of the dict below
        inner = value.number
        if inner is msgspec.UNSET:  # as the dict below: no "number", not a number at all
            raise BadField(f"expected a number, got {value!r}")
        if value.infinite is True or value.set is False:
            return None
        if type(inner) is int:
            return inner
        if isinstance(inner, (dict, SlurmNumber)):
            raise BadField(f"expected a number, got {value!r}")
        return as_number(inner)
    if isinstance(value, dict) and "number" in value:
        if value.get("infinite") is True or value.get("set") is False:
            return None
        inner = value["number"]
        if type(inner) is int:
            return inner
        if isinstance(inner, dict):
            raise BadField(f"expected a number, got {value!r}")
        return as_number(inner)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INT_TEXT.fullmatch(value):
        return int(value)
    raise BadField(f"expected a number, got {value!r}")


def as_u32(value: object) -> int | None:
    """Like `as_number`, but raw NO_VAL/INFINITE sentinels (22.05 leaks them) also mean None."""
    n = as_number(value)
    if n is None or n < 0 or n >= _NO_VAL32:
        return None
    return n


def _string_list(value: object) -> list[str]:
    """A list of strings from a JSON list or a comma-separated string (both occur)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise BadField(f"expected a list of strings, got {value!r}")


class Fields:
    """Typed access to one raw record; a bad field becomes a warning and a default value.

    Methods read one key. Nested objects are read through `sub("time")`, a view whose
    warnings name the whole path ("ignoring time/start ..."). One key per call (rather than a
    path) keeps the per-field cost low: a poll reads ~25 fields of each of 10,000 jobs.
    """

    __slots__ = ("label", "prefix", "raw", "warnings")

    def __init__(
        self, raw: dict[str, Any], label: str, warnings: list[str], prefix: str = ""
    ) -> None:
        self.raw = raw
        self.label = label
        self.warnings = warnings
        self.prefix = prefix  # path of this view inside the record, for warnings

    def warn(self, message: str) -> None:
        self.warnings.append(f"{self.label}: {message}")

    def get(self, key: str) -> Any:
        return self.raw.get(key)

    def sub(self, key: str) -> Fields:
        """The object under `key`; an empty one (every field absent) if it is not an object."""
        value = self.raw.get(key)
        return Fields(
            value if isinstance(value, dict) else {},
            self.label,
            self.warnings,
            f"{self.prefix}{key}/",
        )

    def text(self, key: str) -> str:
        value = self.raw.get(key)
        if isinstance(value, str):
            return value
        if value is not None:
            self.warn(f"ignoring {self.prefix}{key} {value!r} (not a string)")
        return ""

    def u32(self, key: str) -> int | None:
        """Like `as_u32`; plain ints (all of 22.05) skip the general `as_number`."""
        value = self.raw.get(key)
        if type(value) is int:
            n: int | None = value
        else:
            try:
                n = as_number(value)
            except BadField:
                self.warn(f"ignoring {self.prefix}{key} {value!r} (not a number)")
                return None
        return n if n is not None and 0 <= n < _NO_VAL32 else None

    def timestamp(self, key: str) -> int | None:
        """Epoch seconds; Slurm writes 0 for "not yet"."""
        n = self.u32(key)
        return n if n else None

    def strings(self, key: str) -> list[str]:
        value = self.raw.get(key)
        try:
            return _string_list(value)
        except BadField:
            self.warn(f"ignoring {self.prefix}{key} {value!r} (not a list of strings)")
            return []
