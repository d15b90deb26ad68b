"""Judging one HTTP answer from slurmrestd: a well-formed document, or a named failure.

scheduler/slurm/restd.py sends every request through `RestdClient._read`, which hands the
status, content type and body here. Anything but a JSON object with HTTP 200 (or 304 where
"no change" is asked for) becomes a RestdError whose text starts with the part that failed
(core/slurm_failure.py): slurmrestd unreachable, its token refused, something other than
slurmrestd answering (a proxy's HTML page), or an answer that cannot be read (cut short,
`null`, NaN, nested past any sense). Errors Slurm itself reported behind slurmrestd keep
Slurm's words and no prefix: they are slurmctld's (or slurmdbd's) failures.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import aiohttp
import msgspec

from core.slurm_decode import SlurmDecodeError, decode_slurm_json
from core.slurm_failure import Part, failed

# ESLURM_REST_EMPTY_RESULT: the accounting's "no job matched", an answer rather than an error.
_EMPTY_RESULT = 9003
# ESLURM_INVALID_JOB_ID: `job/{id}` of a job slurmctld no longer holds (HTTP 404).
_INVALID_JOB_ID = 2017
# What a streamed answer is read in, and what of it is kept to judge it by.
_CHUNK_BYTES = 1 << 20
_HEAD_BYTES = 4096
# A proxy's "the server behind me did not answer" (Bad Gateway, Unavailable, Gateway Timeout).
GATEWAY = (502, 503, 504)
_FIRST_LINE_CHARS = 120


class _Record(msgspec.Struct, gc=False):
    """Any JSON object, its fields skipped unread."""


class _Stamp(msgspec.Struct, gc=False):
    number: int = 0


class _Stamped(msgspec.Struct, gc=False):
    # Only 23.02+ answers carry it, as {"set", "infinite", "number"}.
    last_update: _Stamp | None = None


class _Shape(msgspec.Struct, gc=False):
    """A jobs answer read for its shape only: a record list, the stamp, the errors."""

    jobs: list[_Record | bool | int | float | str | list[Any] | None] | msgspec.UnsetType = (
        msgspec.UNSET
    )
    last_update: _Stamp | None = None
    errors: Any = None


_shape_decoder = msgspec.json.Decoder(_Shape)


class RestdError(Exception):
    """slurmrestd could not be reached, refused the request or reported an error."""


def first_line(body: bytes) -> str:
    """The first non-blank line of a body, shortened: enough to tell what answered."""
    for line in body[:4096].decode(errors="replace").splitlines():
        if line.strip():
            text = line.strip()
            return text if len(text) <= _FIRST_LINE_CHARS else text[:_FIRST_LINE_CHARS] + "…"
    return "an empty body"


def is_html(content_type: str, body: bytes) -> bool:
    return "html" in content_type or body.lstrip()[:1] == b"<"


def not_restd(where: str, path: str, status: int, body: bytes) -> RestdError:
    return RestdError(
        failed(
            Part.NOT_RESTD,
            f"{where} answered {path} with an HTML page (HTTP {status}, beginning "
            f"{first_line(body)!r}): a proxy or web server answered, not slurmrestd",
        )
    )


def refusal(where: str, path: str, status: int, body: bytes, token_path: str) -> RestdError:
    """A clear error for an answer that is not data (not HTML: the caller checked)."""
    detail = first_error(body)
    if status in (401, 403):
        # slurmrestd itself refused: no or unreadable token, or a daemon started without
        # SLURM_JWT=daemon.
        return RestdError(
            failed(
                Part.TOKEN_REFUSED,
                f"{where} refused the token in {token_path} (HTTP {status}"
                f"{': ' + detail if detail else ''}); is slurmrestd run with SLURM_JWT=daemon?",
            )
        )
    if status == 511 or (status == 500 and "authentication" in detail.lower()):
        return RestdError(
            failed(
                Part.TOKEN_REFUSED,
                f"slurmctld refused the token in {token_path} via {where} (HTTP {status}: "
                f"{detail or 'authentication error'}): expired, or minted with another key; "
                "mint a new one with `scontrol token`",
            )
        )
    if status in GATEWAY:
        return RestdError(
            failed(
                Part.RESTD_UNREACHABLE,
                f"{where} answered {path} with HTTP {status} ({detail or 'no error given'}): "
                "a proxy in front of slurmrestd could not reach it",
            )
        )
    if status == 404:
        return RestdError(f"{where} does not serve {path} (HTTP 404)")
    return RestdError(f"{where}: {path} failed (HTTP {status}): {detail or 'no error given'}")


def document(where: str, what: str, body: bytes, whole: bool = False) -> dict[str, Any]:
    """The JSON object in a 200 answer, without "no results" errors. `whole`: every field
    (a small document: ping, diag); else only those the parsers read (core.slurm_decode)."""
    decoded: dict[str, Any]
    try:
        if whole:
            plain: Any = msgspec.json.decode(body)
            if not isinstance(plain, dict):
                raise SlurmDecodeError(f"a {type(plain).__name__}, not an object")
            decoded = plain
        else:
            decoded = decode_slurm_json(body)
    except (SlurmDecodeError, msgspec.DecodeError, RecursionError) as error:
        reason = str(error).removeprefix("not Slurm JSON: ") or "nested too deeply"
        raise RestdError(
            failed(
                Part.RESTD_GARBLED,
                f"{where}: {what} is not Slurm's JSON ({reason}); its {len(body):,} bytes "
                f"begin {first_line(body)!r}",
            )
        ) from None
    reported = decoded.get("errors")
    errors = [e for e in reported if not _means_no_results(e)] if isinstance(reported, list) else []
    if errors:
        raise RestdError(f"{where}: {what} reported an error: {describe(errors[0])}")
    decoded.pop("errors", None)
    return decoded


def shape(where: str, what: str, body: bytes) -> tuple[int, int]:
    """(records, last_update) of a jobs answer, checked as `document` checks one (JSON,
    an object, no error reported, a list of jobs) without building the records."""
    try:
        found = _shape_decoder.decode(body)
    except (msgspec.DecodeError, RecursionError) as error:
        reason = str(error) or "nested too deeply"
        raise RestdError(
            failed(
                Part.RESTD_GARBLED,
                f"{where}: {what} is not Slurm's JSON ({reason}); its {len(body):,} bytes "
                f"begin {first_line(body)!r}",
            )
        ) from None
    reported = found.errors if isinstance(found.errors, list) else []
    errors = [e for e in reported if not _means_no_results(e)]
    if errors:
        raise RestdError(f"{where}: {what} reported an error: {describe(errors[0])}")
    if found.jobs is msgspec.UNSET:
        raise RestdError(failed(Part.RESTD_GARBLED, f"{where}: {what} has no list of jobs"))
    return len(found.jobs), found.last_update.number if found.last_update else 0


def records(where: str, what: str, decoded: dict[str, Any], key: str) -> None:
    """A read of records must carry them as a list (an empty one included)."""
    if not isinstance(decoded.get(key), list):
        raise RestdError(
            failed(
                Part.RESTD_GARBLED,
                f"{where}: {what} has no list of {key} (keys: "
                f"{', '.join(sorted(decoded)) or 'none'})",
            )
        )


def nothing_found(body: bytes) -> bool:
    """An error answer that only says no record matched (22.05's slurmdb: HTTP 500)."""
    try:
        decoded = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):
        return False
    errors = decoded.get("errors") if isinstance(decoded, dict) else None
    return isinstance(errors, list) and bool(errors) and all(map(_means_no_results, errors))


def _means_no_results(error: object) -> bool:
    return isinstance(error, dict) and error.get("error_number") == _EMPTY_RESULT


def describe(error: object) -> str:
    if not isinstance(error, dict):
        return str(error)
    what = error.get("description") or error.get("error") or "unspecified error"
    return f"{what} ({error['source']})" if error.get("source") else str(what)


def first_error(body: bytes) -> str:
    """The first of errors[] in an error answer, or the body's first line when it is not
    JSON ('' when there is nothing to read)."""
    try:
        decoded = msgspec.json.decode(body) if body else None
    except (msgspec.DecodeError, RecursionError):
        return first_line(body)
    errors = decoded.get("errors") if isinstance(decoded, dict) else None
    return describe(errors[0]) if isinstance(errors, list) and errors else ""


def stamp(body: bytes) -> int:
    """The answer's last_update (23.02+), 0 when it has none or one of another shape: the
    document around it was read already, so this cannot fail the read."""
    try:
        stamped = msgspec.json.decode(body, type=_Stamped)
    except (msgspec.DecodeError, RecursionError):
        return 0
    return stamped.last_update.number if stamped.last_update else 0


def no_such_job(body: bytes) -> bool:
    """A 404 answer of slurmrestd's own that says slurmctld holds no such job."""
    try:
        decoded = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):
        return False
    errors = decoded.get("errors") if isinstance(decoded, dict) else None
    return isinstance(errors, list) and any(
        isinstance(e, dict) and e.get("error_number") == _INVALID_JOB_ID for e in errors
    )


async def stream_into(content: aiohttp.StreamReader, sink: Path) -> bytes:
    """An answer's body written into `sink` as it arrives (a megabyte at a time, so the bot
    never holds a large queue's answer whole), beside it and renamed over it, so that a
    digest never reads half of one; its first bytes. Every write is on a thread: written on
    the loop (680 MB every 20th poll, the nodes every poll at 100,000 jobs and 10,000
    nodes), 107 acks in a minute took over 50 ms, up to 0.75 s, while the bot ran no CPU
    (benchmarks/poll_ack_latency.py --sources --probe: the kernel throttling a writer of
    many dirty pages); on a thread, none did. The old file is removed there too: freeing
    600 MB of blocks held the loop for 300 ms (cli_source.py)."""
    partial = sink.with_name(sink.name + ".partial")
    await asyncio.to_thread(sink.unlink, missing_ok=True)
    await asyncio.to_thread(partial.unlink, missing_ok=True)
    head = b""
    file = await asyncio.to_thread(partial.open, "wb")
    try:
        async for chunk in content.iter_chunked(_CHUNK_BYTES):
            if len(head) < _HEAD_BYTES:
                head += chunk[: _HEAD_BYTES - len(head)]
            await asyncio.to_thread(file.write, chunk)
    finally:
        await asyncio.to_thread(file.close)
    await asyncio.to_thread(os.replace, partial, sink)
    return head
