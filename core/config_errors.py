"""msgspec's validation errors reworded for an operator, naming the key as the file spells it.

Pure; core/config_schema.py's `parse_config` turns every problem into one of these lines.
"""

from __future__ import annotations

import re

import msgspec

_LOCATED = re.compile(r"(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?", re.DOTALL)
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<name>[^`]*)`")
_MISSING = re.compile(r"Object missing required field `(?P<name>[^`]*)`")
_WRONG_TYPE = re.compile(r"Expected `(?P<want>[^`]*)`, got `(?P<got>[^`]*)`")
_OUT_OF_BOUNDS = re.compile(r"Expected `[^`]*` (?P<op>>=|<=|>|<) (?P<bound>\S+)")
_EMPTY = re.compile(r"Expected `str` of length >= 1")
# msgspec's type names as an operator reads them: one value, and several.
_TYPE_WORDS = {
    "int": ("a whole number", "whole numbers"),
    "float": ("a number", "numbers"),
    "str": ("a string", "strings"),
    "bool": ("true or false", "true or false values"),
    "array": ("a list", "lists"),
    "object": ("a table", "tables"),
}
_BOUND_WORDS = {">=": "at least", "<=": "at most", ">": "greater than", "<": "less than"}


def one_line(error: msgspec.ValidationError) -> str:
    """msgspec's message, reworded for an operator and naming the key as the file spells it."""
    located = _LOCATED.fullmatch(str(error))
    assert located is not None  # the pattern matches any text
    what, key = located["what"], (located["path"] or "").lstrip(".")
    if match := _UNKNOWN.fullmatch(what):
        if not key:
            return f"unknown config section or key: {match['name']}"
        return f"unknown config key: {key}.{match['name']}"
    if match := _MISSING.fullmatch(what):
        return f"missing config key: {_join(key, match['name'])}"
    if match := _WRONG_TYPE.fullmatch(what):
        want, got = match["want"], match["got"]
        if key.endswith("]"):  # an item of a list ([0]) or a value of a table ([...])
            container, _, index = key.rpartition("[")
            kind = "a table" if index == "...]" else "a list"
            return f"{container} must be {kind} of {_words(want)[1]}"
        return f"{key} must be {_words(want)[0]}, not {_words(got)[0]}"
    if _EMPTY.fullmatch(what):
        return f"{key} must not be empty"
    if match := _OUT_OF_BOUNDS.fullmatch(what):
        op, bound = match["op"], match["bound"].removesuffix(".0")
        if op == ">=" and bound == "0":
            return f"{key} must not be negative"
        return f"{key} must be {_BOUND_WORDS[op]} {bound}"
    # A section's own rule (__post_init__): its message starts with the key inside the section.
    return _join(key, what)


def _words(type_name: str) -> tuple[str, str]:
    return _TYPE_WORDS.get(type_name, (f"`{type_name}`", f"`{type_name}` values"))


def _join(key: str, rest: str) -> str:
    return f"{key}.{rest}" if key else rest
