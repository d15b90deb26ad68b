"""The router's quick split of unquoted text is shlex's split, whatever is typed."""

from __future__ import annotations

import shlex

from hypothesis import given
from hypothesis import strategies as st

from handlers.command_words import split_words
from handlers.router import UsageError

# shlex's whitespace and quoting, Unicode spaces it does not split on, and shell-ish punctuation.
TYPED = st.text(alphabet=" \t\r\n\x0b\x0c\u00a0\u2003ab-=.:/@#;|&<>'\"\\", max_size=16)


@given(TYPED)
def test_split_words_is_shlex_split(text: str) -> None:
    try:
        expected = shlex.split(text)
    except ValueError:
        try:
            split_words(text)
        except UsageError:
            return
        raise AssertionError(f"{text!r}: shlex refuses it, split_words did not") from None
    split = split_words(text)
    assert split.words == [w for w in expected if w not in ("--here", "--chart")]
    assert split.here == ("--here" in expected) and split.chart == ("--chart" in expected)


def test_flags_are_taken_out_of_unquoted_text() -> None:
    split = split_words("gpus  hoffman-lab\t--here --chart")
    assert (split.words, split.here, split.chart) == (["gpus", "hoffman-lab"], True, True)
