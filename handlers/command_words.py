"""Splitting `/sky …` text into words, and taking out the flags every command understands
(`--here`, `--chart`, `--cluster NAME`)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from handlers.request import UsageError


@dataclass(frozen=True)
class Words:
    """The command text split into words, less the flags every command understands."""

    words: list[str]
    # `--here`: answer in the channel for everyone, not only to the asker.
    here: bool
    # `--chart`: also post the answer's chart.
    chart: bool
    # `--cluster NAME`: the cluster the command is about (None: chosen by its words).
    cluster: str | None = None


# Text without quotes or backslashes splits as shlex would split it, on shlex's whitespace:
# the common case skips shlex's character-by-character lexer, a third of a command's routing.
_NOTHING_QUOTED = re.compile(r"[^'\"\\]*")
_SHELL_SPACE = re.compile(r"[ \t\r\n]+")


def split_words(text: str) -> Words:
    if _NOTHING_QUOTED.fullmatch(text):
        words = [word for word in _SHELL_SPACE.split(text) if word]
    else:
        try:
            words = shlex.split(text)
        except ValueError as error:
            message = f"I could not read that command ({error}). Check your quotes."
            raise UsageError(message) from None
    cluster, words = _cluster_flag(words)
    return Words(
        [w for w in words if w not in ("--here", "--chart")],
        "--here" in words,
        "--chart" in words,
        cluster,
    )


def _cluster_flag(words: list[str]) -> tuple[str | None, list[str]]:
    """`--cluster NAME` or `--cluster=NAME` anywhere, taken out of the words."""
    for i, word in enumerate(words):
        if word.startswith("--cluster="):
            return word.partition("=")[2] or _no_cluster_name(), words[:i] + words[i + 1 :]
        if word == "--cluster":
            if i + 1 == len(words):
                _no_cluster_name()
            return words[i + 1], words[:i] + words[i + 2 :]
    return None, words


def _no_cluster_name() -> str:
    raise UsageError("`--cluster` needs a cluster's name: `--cluster NAME`.")
