"""Reading a Slurm JSON document's record list a slice at a time.

At 100,000 jobs `squeue --json` is over 600 MB. Read and decoded whole, the text and its
records held the poll worker near 1 GB on every full read (issue 17). Decoded a slice of
records at a time, only one slice's text and objects are held besides the parsed jobs.

JSON gives no cheap way to find where a record ends short of parsing it, but Slurm's record
lists allow a safe guess. Between two records there is `}`, `,`, `{` and the records' first
key in quotes. A quote inside a JSON string is always escaped, so that pattern never lies
inside a string (a job name cannot fake it). It can lie between two objects nested inside a
record, in a list of objects that open with the same key. So each guess is checked by
decoding the slice: a JSON parser reads a prefix of a text exactly as it reads the whole
text, so a slice that decodes as a list of complete objects ends where a record ends. A
slice that does not decode moves the guess back to the boundary before. If the layout is
not found, or guesses keep failing, `NotStreamable` tells the caller to read the document
whole, as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from core.slurm_decode import SlurmDecodeError, decode_slurm_json

# About 400 records of 24.x's squeue per slice.
SLICE_BYTES = 2 << 20
# Where the record list must have started (22.05 prints `meta` and `errors` first: a few KB).
_HEAD_LIMIT = 4 << 20
# Text this large with no record boundary found in it: the caller reads the document whole.
_RECORD_LIMIT = 64 << 20
# Guesses checked per slice before giving up on streaming this document, out of the last
# boundaries found.
_GUESSES = 8
_CANDIDATES = 64
_WHITESPACE = b" \t\r\n"
_FIRST_KEY = re.compile(rb'\s*\{\s*"((?:[^"\\]|\\.)*)"')


class NotStreamable(Exception):
    """The document's layout was not recognised: decode it whole instead."""


def record_slices(
    read: Callable[[int], bytes], key: str = "jobs", slice_bytes: int = SLICE_BYTES
) -> Iterator[dict[str, Any]]:
    """The document that `read` returns, in pieces, each decoded as `decode_slurm_json`
    decodes a whole document: first pieces holding the records under `key`, in order, then
    the rest of the document (errors, meta, ...) with `key` an empty list.

    Raises NotStreamable, possibly after some pieces, if the layout is not recognised:
    nothing yielded may be used then."""
    opening = re.compile(rb'"' + re.escape(key.encode()) + rb'"\s*:\s*\[')
    head = b""
    while (found := opening.search(head)) is None:
        more = read(slice_bytes)
        if not more or len(head) > _HEAD_LIMIT:
            raise NotStreamable(f"no {key!r} list at the start of the document")
        head += more
    prefix, pending = head[: found.end() - 1], head[found.end() :]
    del head
    wrap = b'{"' + key.encode() + b'":['
    boundary: re.Pattern[bytes] | None = None
    wanted = slice_bytes
    ended = False
    while True:
        while not ended and len(pending) < wanted:
            more = read(slice_bytes)
            ended = not more
            pending += more
        if boundary is None:
            boundary = _boundary_after_first_key(pending)
            if boundary is None:
                break  # an empty list: only the rest of the document is left
        if (split := _split_at_last_boundary(pending, boundary, wrap)) is not None:
            piece, pending = split
            wanted = slice_bytes
            yield piece
        elif not ended:
            # No record ends in this slice: one record larger than a slice, or guesses
            # that kept falling inside records.
            if len(pending) > _RECORD_LIMIT:
                raise NotStreamable(f"no record boundary found in {len(pending):,} bytes")
            wanted = 2 * len(pending)
        if ended:
            break
    while not ended:
        more = read(slice_bytes)
        ended = not more
        pending += more
    last, suffix = _split_at_list_end(pending, wrap)
    if last is not None:
        yield last
    try:
        rest = decode_slurm_json(prefix + b"[]" + suffix)
    except SlurmDecodeError as error:
        raise NotStreamable(f"the document around the records: {error}") from None
    if rest.get(key) != []:
        raise NotStreamable(f"{key!r} was not the document's own record list")
    yield rest


def _boundary_after_first_key(pending: bytes) -> re.Pattern[bytes] | None:
    """Where one record ends and the next begins, from the first record's first key; None
    for an empty list."""
    if pending.lstrip(_WHITESPACE).startswith(b"]"):
        return None
    first = _FIRST_KEY.match(pending)
    if first is None:
        raise NotStreamable("the first record is not an object with keys")
    return re.compile(rb'\}\s*,(\s*\{\s*"' + re.escape(first.group(1)) + rb'")')


def _split_at_last_boundary(
    pending: bytes, boundary: re.Pattern[bytes], wrap: bytes
) -> tuple[dict[str, Any], bytes] | None:
    """The records up to the last boundary that checks out, decoded, and the text after it;
    None if none of the boundaries guessed in `pending` checks out."""
    ends = _last_matches(pending, boundary, _CANDIDATES)
    if not ends:
        return None
    # Slurm pretty-prints: a record boundary is the least indented of them, and nested
    # objects' are deeper. Compact text has no such tell; the last boundary is tried first.
    ends.sort(key=lambda end: (len(end.group(0)), -end.start()))
    for end in ends[:_GUESSES]:
        try:
            piece = decode_slurm_json(wrap + pending[: end.start() + 1] + b"]}")
        except SlurmDecodeError:
            continue  # between two objects nested in a record: the boundary before
        return piece, pending[end.start(1) :]
    return None  # all inside the last record: read on


def _last_matches(text: bytes, pattern: re.Pattern[bytes], count: int) -> list[re.Match[bytes]]:
    """Up to `count` last matches of `pattern` in `text`: looked for in the text's tail
    first, which is where they are, rather than across all of it."""
    window = 1 << 16
    while True:
        start = max(0, len(text) - window)
        found = list(pattern.finditer(text, start))
        if len(found) >= count or start == 0:
            return found[-count:]
        window *= 4


def _split_at_list_end(pending: bytes, wrap: bytes) -> tuple[dict[str, Any] | None, bytes]:
    """The last records (None if the list ended with the piece before) and what follows
    the list's closing bracket."""
    stripped = pending.lstrip(_WHITESPACE)
    if stripped.startswith(b"]"):
        return None, stripped[1:]
    for guess, end in enumerate(re.finditer(rb"\}\s*\]", pending)):
        if guess == _CANDIDATES:
            break
        try:
            piece = decode_slurm_json(wrap + pending[: end.start() + 1] + b"]}")
        except SlurmDecodeError:
            continue  # a list nested in the last record
        return piece, pending[end.end() :]
    raise NotStreamable("the record list does not end")
