"""`literal()`: the one way text skybot did not write reaches Slack.

(`fenced_code()` is its counterpart for a multi-line ``` block, such as a batch script that
holds a lab's partition or a user's path: same characters made inert, lines kept.)

Job names, paths, user names, partitions, node names, Slurm's and sbatch's messages, words a
user typed, Slack's own error codes: anything not written by skybot is shown as a one-line
mrkdwn code span, built here and nowhere else.

Why a code span, rather than escaping each formatting character in running text:

- Inside a code span Slack applies no `*bold*`, `_italic_` or `~strike~`, so those characters
  stay exactly what they are, and a path copied out of Slack is the path on disk. The
  alternatives (a zero-width space after each delimiter, look-alike characters) either depend
  on Slack's undocumented word-boundary rules or put invisible or different characters into
  what users copy back into a shell.
- Slack's control sequences (`<!channel>`, `<@U…>`, `<http…|…>`) are parsed everywhere, code
  spans included, so `&`, `<` and `>` become entities as Slack asks; Slack shows (and copies)
  them as the characters they stand for.
- The span can only be closed by a backtick, so a backtick inside becomes U+02CB (modifier
  letter grave accent), its look-alike; and a newline could leave a span open on the next
  line, so the text is made one line. Truncation happens inside the span, never across it.
- Bidirectional controls (U+202A to U+202E, U+2066 to U+2069, U+200E/F, U+061C) would let a
  job name display as something else ("Trojan Source"); each becomes U+FFFD, visibly there
  but inert. Other control characters become spaces.
"""

from __future__ import annotations

import re

# Longest untrusted text shown by default; callers echoing typed words ask for less.
DEFAULT_LIMIT = 300
BACKTICK_LOOKALIKE = "\u02cb"
_BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
_CHARACTER_MAP = {
    **dict.fromkeys(map(ord, _BIDI_CONTROLS), "\ufffd"),
    ord("&"): "&amp;",
    ord("<"): "&lt;",
    ord(">"): "&gt;",
    ord("`"): BACKTICK_LOOKALIKE,
}
# C0 and C1 controls, DEL, and the Unicode line and paragraph separators.
_LINE_BREAKERS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
# The same, less newline and tab, which a block keeps.
_BLOCK_BREAKERS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]+")
# Three backticks would close a ``` block; one or two inside it are just text.
_FENCE_RUN = re.compile(r"`{3,}")


def literal(text: object, limit: int = DEFAULT_LIMIT) -> str:
    """`text` as an inert, one-line mrkdwn code span of at most `limit` visible characters."""
    flat = " ".join(_LINE_BREAKERS.sub(" ", str(text)).split())
    if not flat:
        return '`""`'
    if len(flat) > limit:
        flat = flat[: max(1, limit - 1)] + "…"
    return f"`{flat.translate(_CHARACTER_MAP)}`"


def fenced_code(text: str) -> str:
    """Multi-line text as the inside of a ``` block: `&`, `<`, `>` as entities, bidi controls
    as U+FFFD, other controls but newline and tab as spaces, no run of backticks that could
    close the block. The caller adds the fences (a long block may be cut between lines)."""
    flat = _BLOCK_BREAKERS.sub(" ", text)
    flat = _FENCE_RUN.sub(lambda run: BACKTICK_LOOKALIKE * len(run.group()), flat)
    return flat.translate({k: v for k, v in _CHARACTER_MAP.items() if k != ord("`")})


def clip_markdown(text: str, limit: int) -> str:
    """mrkdwn of at most `limit` characters, never cut inside a code span.

    A span cut open would turn the rest of the message (or whatever Slack puts after it) into
    code, or make a stray backtick pair up with one in the next line.
    """
    if len(text) <= limit:
        return text
    kept = text[: limit - 1]
    while kept.count("`") % 2:
        kept = kept[: kept.rfind("`")]
    return kept + "…"
