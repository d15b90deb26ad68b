"""Read a Slurm cluster through slurmrestd (HTTP over TCP or a unix socket, JWT auth).

The answers are the documents the CLI path reads (`squeue --json`, `scontrol show nodes
--json`, `sacct --json`, `squeue --only-job-state --json`): slurmrestd and the commands dump
them with the same plugin (22.05: openapi/v0.0.38 and dbv0.0.38; 23.02+: data_parser
v0.0.39..42), so core.slurm_json parses both alike.

What only a long-lived client gets: `update_time`. Given the time of the last answer, the
controller answers "no change" for the price of a lock and a compare (22.05: HTTP 304; 24.x:
`"jobs": []` with `last_update` 0) instead of dumping the whole queue. `SlurmRead.update_time`
is what to pass next time; a `None` document means nothing changed since.

Reads only. Submitting and cancelling stay with the runner, as the user: a token good for
everyone's jobs (SlurmUser's) would make every action the bot's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import msgspec
from yarl import URL

from core.slurm_decode import SlurmDecodeError, decode_slurm_json
from scheduler.slurm.restd_token import TokenFile, TokenFileError

# What core.slurm_json decodes, newest first: the client takes the newest the daemon serves.
# 22.05's v0.0.36/37 are older shapes than the decoders know.
READABLE_VERSIONS = ("v0.0.42", "v0.0.41", "v0.0.40", "v0.0.39", "v0.0.38")
# 22.05's plugin: paths without a trailing slash, no jobs/state, 304 for "no change", and
# accounting times as text (an epoch gets HTTP 500 "Unable to parse time format").
LEGACY_VERSION = "v0.0.38"
# ESLURM_REST_EMPTY_RESULT: the accounting's "no job matched", an answer rather than an error.
_EMPTY_RESULT = 9003
# An update_time this far behind the client's clock: the controller's clock may be behind
# ours by that much, and a second too early only costs one full read.
_CLOCK_MARGIN = 1


class RestdError(Exception):
    """slurmrestd could not be reached, refused the request or reported an error."""


@dataclass(frozen=True)
class SlurmRead:
    # None: nothing changed since the update_time the read was given.
    document: dict[str, Any] | None
    # What to pass as update_time next time.
    update_time: int


class _LastUpdate(msgspec.Struct, gc=False):
    number: int = 0


class _Stamp(msgspec.Struct, gc=False):
    # Only 23.02+ answers carry it, as {"set", "infinite", "number"}.
    last_update: _LastUpdate | None = None


class RestdClient:
    """One slurmrestd. `address` is `http://HOST:PORT` or `unix:/path/to/slurmrestd.sock`."""

    def __init__(
        self,
        address: str,
        token_file: str | Path,
        timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.address = address
        self.token = TokenFile(token_file)
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._seconds = timeout
        self._clock = clock
        self._version: str | None = None
        self._session: aiohttp.ClientSession | None = None
        if address.startswith("unix:"):
            self._socket: str | None = address.removeprefix("unix:")
            self._base = "http://localhost"
        elif address.startswith(("http://", "https://")):
            self._socket = None
            self._base = address.rstrip("/")
        else:
            raise ValueError(
                f"slurmrestd address {address!r}: expected http://HOST:PORT or unix:PATH"
            )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> RestdClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    # -- what the daemon offers ---------------------------------------------------------------

    async def version(self) -> str:
        """The newest API version both slurmrestd serves and skybot reads (asked once)."""
        if self._version is None:
            for version in READABLE_VERSIONS:
                status, _ = await self._get(self._path("slurm", version, "ping"), {}, probe=True)
                if status != 404:
                    self._version = version
                    break
            else:
                raise RestdError(
                    f"slurmrestd at {self.address} serves none of the API versions skybot reads "
                    f"({', '.join(reversed(READABLE_VERSIONS))}); is it started with "
                    "`-s openapi/v0.0.38,openapi/dbv0.0.38` (22.05) or a data_parser of those?"
                )
        return self._version

    # -- reads --------------------------------------------------------------------------------

    async def jobs(self, update_time: int | None = None) -> SlurmRead:
        """The queue, as `squeue --all --json` has it; None if unchanged since update_time."""
        version = await self.version()
        params: dict[str, object] = {} if version == LEGACY_VERSION else {"flags": "ALL"}
        return await self._changed_since("jobs", version, params, update_time)

    async def nodes(self, update_time: int | None = None) -> SlurmRead:
        """The nodes, as `scontrol show nodes --json` has them (and 22.05's `sinfo --json`).

        22.05 reads the partitions with the same update_time: once a node changed after it
        and the partitions did not, it answers HTTP 500 "Unspecified error" (seen on 22.05.8).
        """
        version = await self.version()
        # No flags: the default is SHOW_DETAIL, as scontrol's. flags=ALL drops it, and with it
        # gres_used (a node with jobs on its GPUs then reads ALLOCATED with none in use).
        return await self._changed_since("nodes", version, {}, update_time)

    async def partitions(self) -> dict[str, Any]:
        version = await self.version()
        _, body = await self._get(self._path("slurm", version, "partitions"), {})
        return self._checked(body, "partitions")

    async def reservations(self) -> dict[str, Any]:
        """The reservations, as `scontrol show reservation --json` has them."""
        version = await self.version()
        _, body = await self._get(self._path("slurm", version, "reservations"), {})
        return self._checked(body, "reservations")

    async def qos(self) -> dict[str, Any]:
        """Accounting's QOS, as `sacctmgr --json show qos` has them (22.05: under "QOS")."""
        version = await self.version()
        _, body = await self._get(self._path("slurmdb", version, "qos"), {})
        return self._checked(body, "slurmdb qos")

    async def job_states(self) -> dict[str, Any]:
        """Every job's id and state only, as `squeue --only-job-state --json` (24.05+)."""
        version = await self.version()
        if version in (LEGACY_VERSION, "v0.0.39"):
            raise RestdError(
                f"slurmrestd at {self.address} speaks {version}, which has no jobs/state "
                "(Slurm 24.05+): read the jobs instead"
            )
        _, body = await self._get(self._path("slurm", version, "jobs/state"), {})
        return self._document(body, "jobs/state")

    async def accounting_jobs(self, start: float, end: float) -> dict[str, Any]:
        """Jobs from slurmdbd between two epoch times, as `sacct --json --allusers` has them."""
        version = await self.version()
        if version == LEGACY_VERSION:
            # 22.05 parses local time text; its query parser refuses a literal colon, so the
            # colons are sent percent-encoded (which _get does to every value).
            window = {"start_time": _local_text(start), "end_time": _local_text(end)}
        else:
            window = {"start_time": str(int(start)), "end_time": str(int(end))}
        _, body = await self._get(self._path("slurmdb", version, "jobs"), window)
        return self._document(body, "slurmdb jobs")

    async def answers_ping(self) -> bool:
        """Whether slurmctld answers slurmrestd's ping (its cheapest RPC) now."""
        version = await self.version()
        try:
            _, body = await self._get(self._path("slurm", version, "ping"), {})
            pings = self._document(body, "ping").get("pings") or []
        except RestdError:
            return False
        # 22.05 says {"ping": "UP"}, 24.x {"pinged": "UP"}.
        return any(isinstance(p, dict) and "UP" in (p.get("ping"), p.get("pinged")) for p in pings)

    async def dbd_queue_size(self) -> int | None:
        """slurmctld's queue of messages for slurmdbd (sdiag's "DBD Agent queue size")."""
        version = await self.version()
        _, body = await self._get(self._path("slurm", version, "diag"), {})
        statistics = self._document(body, "diag").get("statistics")
        size = statistics.get("dbd_agent_queue_size") if isinstance(statistics, dict) else None
        return size if type(size) is int else None

    async def associations(self) -> dict[str, Any]:
        """Accounting's associations, as `sacctmgr --json show associations` has them."""
        version = await self.version()
        _, body = await self._get(self._path("slurmdb", version, "associations"), {})
        return self._document(body, "slurmdb associations")

    # -- plumbing -----------------------------------------------------------------------------

    async def _changed_since(
        self, what: str, version: str, params: dict[str, object], update_time: int | None
    ) -> SlurmRead:
        asked_at = int(self._clock()) - _CLOCK_MARGIN
        if update_time is not None:
            params = {**params, "update_time": update_time}
        status, body = await self._get(self._path("slurm", version, what), params)
        if status == 304:  # 22.05, and 24.x's nodes
            assert update_time is not None
            return SlurmRead(None, update_time)
        stamp = msgspec.json.decode(body, type=_Stamp) if body else _Stamp()
        last_update = stamp.last_update.number if stamp.last_update else 0
        document = self._document(body, what)
        if update_time is not None and last_update == 0 and not document.get(what):
            # 24.x's "no change": an empty list stamped 0, where an empty queue has a time.
            return SlurmRead(None, update_time)
        # 22.05 stamps nothing: the client's clock stands in for the controller's.
        return SlurmRead(document, last_update or asked_at)

    def _path(self, api: str, version: str, what: str) -> str:
        return f"/{api}/{version}/{what}" + ("" if version == LEGACY_VERSION else "/")

    def _session_now(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = (
                aiohttp.UnixConnector(path=self._socket) if self._socket else aiohttp.TCPConnector()
            )
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self._session

    async def _get(
        self, path: str, params: Mapping[str, object], probe: bool = False
    ) -> tuple[int, bytes]:
        try:
            headers = self.token.current().headers()
        except TokenFileError as error:
            raise RestdError(str(error)) from None
        query = "&".join(f"{key}={quote(str(value), safe='')}" for key, value in params.items())
        url = URL(self._base + path + (f"?{query}" if query else ""), encoded=True)
        try:
            async with self._session_now().get(url, headers=headers) as response:
                body = await response.read()
                status = response.status
        except TimeoutError:
            raise RestdError(
                f"slurmrestd at {self.address} did not answer {path} within {self._seconds:g} s"
            ) from None
        except aiohttp.ClientConnectionError as error:
            reason = getattr(error, "os_error", None) or error
            raise RestdError(f"cannot connect to slurmrestd at {self.address}: {reason}") from None
        if status in (200, 304) or (probe and status == 404):
            return status, body
        raise self._refusal(path, status, body)

    def _refusal(self, path: str, status: int, body: bytes) -> RestdError:
        """A clear error for an answer that is not data."""
        where = f"slurmrestd at {self.address}"
        detail = _first_error(body)
        if status == 401:
            # slurmrestd itself refused: no or unreadable token, or a daemon started without
            # SLURM_JWT=daemon. The file may have been replaced since: read it again next time.
            self.token.forget()
            return RestdError(
                f"{where} refused the token in {self.token.path} (HTTP 401"
                f"{': ' + detail if detail else ''}); is slurmrestd run with SLURM_JWT=daemon?"
            )
        if status == 511 or (status == 500 and "authentication" in detail.lower()):
            self.token.forget()
            return RestdError(
                f"slurmctld refused the token in {self.token.path} via {where} (HTTP {status}: "
                f"{detail or 'authentication error'}): expired, or minted with another key; "
                "mint a new one with `scontrol token`"
            )
        if status == 404:
            return RestdError(f"{where} does not serve {path} (HTTP 404)")
        hint = ""
        if status == 500 and LEGACY_VERSION in path:
            # 22.05 answers a token slurmctld refused this way too ("Failed while looking for
            # jobs", "Unspecified error"), with nothing in the answer to tell it apart.
            self.token.forget()
            hint = f"; if slurmctld is up, it may have refused the token in {self.token.path}"
        return RestdError(
            f"{where}: {path} failed (HTTP {status}): {detail or 'no error given'}{hint}"
        )

    def _document(self, body: bytes, what: str) -> dict[str, Any]:
        try:
            document = decode_slurm_json(body)
        except SlurmDecodeError as error:
            raise RestdError(f"slurmrestd at {self.address}: {what} is not JSON: {error}") from None
        errors = [e for e in document.get("errors") or [] if not _means_no_results(e)]
        if errors:
            raise RestdError(
                f"slurmrestd at {self.address}: {what} reported an error: {_describe(errors[0])}"
            )
        document.pop("errors", None)
        return document

    def _checked(self, body: bytes, what: str) -> dict[str, Any]:
        """The whole document (`_document` keeps only the jobs' and nodes' fields), or
        RestdError if it reports an error."""
        document = self._plain(body, what)
        errors = [e for e in document.get("errors") or [] if not _means_no_results(e)]
        if errors:
            raise RestdError(
                f"slurmrestd at {self.address}: {what} reported an error: {_describe(errors[0])}"
            )
        return document

    def _plain(self, body: bytes, what: str) -> dict[str, Any]:
        try:
            document = msgspec.json.decode(body)
        except msgspec.DecodeError as error:
            raise RestdError(f"slurmrestd at {self.address}: {what} is not JSON: {error}") from None
        if not isinstance(document, dict):
            raise RestdError(f"slurmrestd at {self.address}: {what} is not a JSON object")
        return document


def _local_text(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


def _means_no_results(error: object) -> bool:
    return isinstance(error, dict) and error.get("error_number") == _EMPTY_RESULT


def _describe(error: object) -> str:
    if not isinstance(error, dict):
        return str(error)
    what = error.get("description") or error.get("error") or "unspecified error"
    return f"{what} ({error['source']})" if error.get("source") else str(what)


def _first_error(body: bytes) -> str:
    """The first of errors[] in an error answer, or '' when there is none to read."""
    try:
        document = msgspec.json.decode(body) if body else None
    except msgspec.DecodeError:
        return body[:200].decode(errors="replace").strip()
    errors = document.get("errors") if isinstance(document, dict) else None
    return _describe(errors[0]) if isinstance(errors, list) and errors else ""
