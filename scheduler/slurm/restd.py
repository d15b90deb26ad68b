"""Read a Slurm cluster through slurmrestd (HTTP over TCP or a unix socket, JWT auth).

The answers are the documents the CLI path reads (`squeue --json`, `scontrol show nodes
--json`, `sacct --json`, `squeue --only-job-state --json`): slurmrestd and the commands dump
them with the same plugin (22.05: openapi/v0.0.38 and dbv0.0.38; 23.02+: data_parser
v0.0.39..42), so core.slurm_json parses both alike.

What only a long-lived client gets: `update_time`. Given the time of the last answer, the
controller answers "no change" for the price of a lock and a compare (22.05: HTTP 304; 24.x:
`"jobs": []` with `last_update` 0) instead of dumping the whole queue. `SlurmRead.update_time`
is what to pass next time; a `None` document means nothing changed since.

Every answer passes `_body`: anything but a well-formed document is a RestdError naming
the part that failed (restd_answer.py). Reads only: actions stay with the runner, as the user.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
from yarl import URL

from core.controller_diag import ControllerDiag, diag_from_restd
from core.slurm_failure import Part, failed
from scheduler.slurm import restd_answer
from scheduler.slurm.restd_answer import RestdError
from scheduler.slurm.restd_identity import unsafe_token
from scheduler.slurm.restd_token import TokenFile, TokenFileError

__all__ = ["RestdClient", "RestdError", "SlurmRead"]

# What core.slurm_json decodes, newest first: the client takes the newest the daemon serves.
# 22.05's v0.0.36/37 are older shapes than the decoders know.
READABLE_VERSIONS = ("v0.0.42", "v0.0.41", "v0.0.40", "v0.0.39", "v0.0.38")
# 22.05's plugin: paths without a trailing slash, no jobs/state, 304 for "no change", and
# accounting times as text (an epoch gets HTTP 500 "Unable to parse time format").
LEGACY_VERSION = "v0.0.38"
# An update_time this far behind the client's clock: the controller's clock may be behind
# ours by that much, and a second too early only costs one full read.
_CLOCK_MARGIN = 1


@dataclass(frozen=True)
class SlurmRead:
    # None: nothing changed since the update_time the read was given.
    document: dict[str, Any] | None
    # What to pass as update_time next time.
    update_time: int


class RestdClient:
    """One slurmrestd. `address` is `http://HOST:PORT` or `unix:/path/to/slurmrestd.sock`."""

    def __init__(
        self,
        address: str,
        token_file: str | Path,
        timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
        privileged: frozenset[str] = frozenset({"root"}),
    ) -> None:
        self.address = address
        self.token = TokenFile(token_file)
        # Users whose token is refused (root, SlurmUser: scheduler/slurm/restd_identity.py).
        self._privileged = privileged
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._seconds = timeout
        self.clock = clock
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
                # A version counts once its ping is a well-formed answer: a proxy's page
                # served for every path must not pin a version the daemon lacks.
                path = self._path("slurm", version, "ping")
                if await self._read(path, {}, "ping", whole=True, probe=True) is not None:
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

    async def body(
        self,
        what: str,
        params: Mapping[str, object],
        *,
        unchanged_ok: bool = False,
        gone_ok: bool = False,
        sink: Path | None = None,
    ) -> bytes | None:
        """The bytes of slurmctld's answer to `what` (a path under /slurm/VERSION/), not
        decoded (scheduler/slurm/restd_jobs.py checks and files them). None: unchanged (HTTP
        304, `unchanged_ok`) or no such job (`gone_ok`). With `sink`, a 200 answer is
        streamed into that file (its bytes are never held whole; its first ones returned)."""
        path = self._path("slurm", await self.version(), what)
        return await self._body(path, params, unchanged_ok, gone_ok=gone_ok, sink=sink)

    async def nodes(self, update_time: int | None = None) -> SlurmRead:
        """The nodes, as `scontrol show nodes --json` has them (and 22.05's `sinfo --json`).

        22.05 reads the partitions with the same update_time: once a node changed after it
        and the partitions did not, it answers HTTP 500 "Unspecified error" (seen on 22.05.8).
        """
        version = await self.version()
        # No flags: the default is SHOW_DETAIL, as scontrol's. flags=ALL drops it, and with it
        # gres_used (a node with jobs on its GPUs then reads ALLOCATED with none in use).
        return await self._changed_since("nodes", version, {}, update_time)

    async def whole(self, plugin: str, name: str) -> dict[str, Any]:
        """A small document read whole: "slurm" partitions or reservations (as scontrol's
        --json has them), "slurmdb" qos (as sacctmgr's; 22.05: under "QOS")."""
        version = await self.version()
        what = name if plugin == "slurm" else f"{plugin} {name}"
        return await self._answer(self._path(plugin, version, name), {}, what, whole=True)

    async def job_states(self) -> dict[str, Any]:
        """Every job's id and state only, as `squeue --only-job-state --json` (24.05+)."""
        version = await self.version()
        if version in (LEGACY_VERSION, "v0.0.39"):
            raise RestdError(
                f"slurmrestd at {self.address} speaks {version}, which has no jobs/state "
                "(Slurm 24.05+): read the jobs instead"
            )
        return await self._answer(self._path("slurm", version, "jobs/state"), {}, "jobs/state")

    async def accounting_jobs(self, start: float, end: float) -> dict[str, Any]:
        """Jobs from slurmdbd between two epoch times, as `sacct --json --allusers` has them."""
        version = await self.version()
        if version == LEGACY_VERSION:
            # 22.05 parses local time text; its query parser refuses a literal colon, so the
            # colons are sent percent-encoded (which _get does to every value).
            window = {"start_time": _local_text(start), "end_time": _local_text(end)}
        else:
            window = {"start_time": str(int(start)), "end_time": str(int(end))}
        return await self._answer(self._path("slurmdb", version, "jobs"), window, "slurmdb jobs")

    async def answers_ping(self) -> bool:
        """Whether slurmctld answers slurmrestd's ping (its cheapest RPC) now."""
        version = await self.version()
        ping = await self._answer(self._path("slurm", version, "ping"), {}, "ping", whole=True)
        pings = ping.get("pings")
        if not isinstance(pings, list):
            return False
        # 22.05 says {"ping": "UP"}, 24.x {"pinged": "UP"}.
        return any(isinstance(p, dict) and "UP" in (p.get("ping"), p.get("pinged")) for p in pings)

    async def controller_diag(self) -> ControllerDiag:
        """slurmctld's queue of messages for slurmdbd (sdiag's "DBD Agent queue size") and
        the time on its clock."""
        version = await self.version()
        diag = await self._answer(self._path("slurm", version, "diag"), {}, "diag", whole=True)
        return diag_from_restd(diag)

    async def rpc_users(self) -> set[str] | None:
        """The names slurmctld counts RPCs under (sdiag's "by user"): a user it cannot
        resolve is counted under a number. None if diag does not list them."""
        version = await self.version()
        diag = await self._answer(self._path("slurm", version, "diag"), {}, "diag", whole=True)
        statistics = diag.get("statistics")
        counted = statistics.get("rpcs_by_user") if isinstance(statistics, dict) else None
        if not isinstance(counted, list):
            return None
        return {str(item.get("user")) for item in counted if isinstance(item, dict)}

    async def associations(self) -> dict[str, Any]:
        """Accounting's associations, as `sacctmgr --json show associations` has them."""
        version = await self.version()
        path = self._path("slurmdb", version, "associations")
        return await self._answer(path, {}, "slurmdb associations")

    async def accounting_user(self, name: str) -> dict[str, Any] | None:
        """Accounting's record of the user `name`, or None if it knows no such user."""
        version = await self.version()
        path = self._path("slurmdb", version, f"user/{quote(name, safe='')}")
        answer = await self._read(path, {}, "slurmdb user", whole=True, nothing_found_ok=True)
        users = answer.get("users") if answer else None
        found = [u for u in users if isinstance(u, dict)] if isinstance(users, list) else []
        return found[0] if found else None

    # -- plumbing -----------------------------------------------------------------------------

    async def _changed_since(
        self, what: str, version: str, params: dict[str, object], update_time: int | None
    ) -> SlurmRead:
        asked_at = int(self.clock()) - _CLOCK_MARGIN
        if update_time is not None:
            params = {**params, "update_time": update_time}
        path = self._path("slurm", version, what)
        document = await self._read(path, params, what, unchanged_ok=update_time is not None)
        if document is None:  # HTTP 304: 22.05, and 24.x's nodes
            assert update_time is not None
            return SlurmRead(None, update_time)
        restd_answer.records(self.where, what, document, what)
        last_update = document.pop(_STAMP_KEY, 0)
        if update_time is not None and last_update == 0 and not document[what]:
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

    @property
    def where(self) -> str:
        return f"slurmrestd at {self.address}"

    async def _read(
        self,
        path: str,
        params: Mapping[str, object],
        what: str,
        *,
        whole: bool = False,
        unchanged_ok: bool = False,
        probe: bool = False,
        nothing_found_ok: bool = False,
    ) -> dict[str, Any] | None:
        """The one way a document comes in: a well-formed one (None: HTTP 304 where
        `unchanged_ok`, 404 where `probe`, "nothing found" where `nothing_found_ok`), else a
        RestdError naming the part that failed (scheduler/slurm/restd_answer.py)."""
        body = await self._body(path, params, unchanged_ok, probe, nothing_found_ok)
        if body is None:
            return None
        document = restd_answer.document(self.where, what, body, whole)
        if not whole and what in ("jobs", "nodes"):
            document[_STAMP_KEY] = restd_answer.stamp(body)
        return document

    async def _body(
        self,
        path: str,
        params: Mapping[str, object],
        unchanged_ok: bool = False,
        probe: bool = False,
        nothing_found_ok: bool = False,
        *,
        gone_ok: bool = False,
        sink: Path | None = None,
    ) -> bytes | None:
        """The body of an HTTP 200 that is not an HTML page (None as for `_read`, or for a
        404 that names no such job where `gone_ok`), else a RestdError: every answer passes
        here."""
        status, content_type, body = await self._get(path, params, sink)
        if status == 304 and unchanged_ok:
            return None
        if status == 404 and (probe or (gone_ok and restd_answer.no_such_job(body))):
            return None
        if status == 500 and nothing_found_ok and restd_answer.nothing_found(body):
            return None
        if restd_answer.is_html(content_type, body) and status not in restd_answer.GATEWAY:
            raise restd_answer.not_restd(self.where, path, status, body)
        if status != 200:
            if status == 404:
                # An upgraded daemon may no longer serve the version chosen: choose again.
                self._version = None
            if status in (401, 403, 511) or (status == 500 and LEGACY_VERSION in path):
                # The file may have been replaced since: read it again next time.
                self.token.forget()
            error = restd_answer.refusal(self.where, path, status, body, str(self.token.path))
            if status == 500 and LEGACY_VERSION in path:
                # 22.05 answers a token slurmctld refused this way too ("Failed while looking
                # for jobs", "Unspecified error"), with nothing in the answer to tell it apart.
                error = RestdError(
                    f"{error}; if slurmctld is up, it may have refused the token in "
                    f"{self.token.path}"
                )
            raise error
        return body

    async def _answer(
        self, path: str, params: Mapping[str, object], what: str, whole: bool = False
    ) -> dict[str, Any]:
        document = await self._read(path, params, what, whole=whole)
        assert document is not None  # None only for "no change" or a probe's 404
        return document

    async def _get(
        self, path: str, params: Mapping[str, object], sink: Path | None = None
    ) -> tuple[int, str, bytes]:
        """(status, content type, body) of one GET, or a RestdError if there is none. With
        `sink`, a 200 body is streamed into that file and only its first bytes returned."""
        try:
            token = self.token.current()
        except TokenFileError as error:
            part = Part.TOKEN_EXPIRED if error.expired else Part.TOKEN_UNUSABLE
            raise RestdError(failed(part, str(error))) from None
        if refused := unsafe_token(token.user, self.token.path, self._privileged):
            raise RestdError(failed(Part.TOKEN_UNSAFE, refused))
        query = "&".join(f"{key}={quote(str(value), safe='')}" for key, value in params.items())
        url = URL(self._base + path + (f"?{query}" if query else ""), encoded=True)
        status = 0
        try:
            async with self._session_now().get(url, headers=token.headers()) as response:
                status = response.status
                if sink is not None and status == 200:
                    body = await restd_answer.stream_into(response.content, sink)
                else:
                    body = await response.read()
                return status, response.content_type, body
        except TimeoutError:
            stage = (
                f"began its answer (HTTP {status}) but did not finish"
                if status
                else "did not answer"
            )
            detail = f"{self.where} {stage} {path} within {self._seconds:g} s"
        except (aiohttp.ClientError, OSError) as error:
            reason = getattr(error, "os_error", None) or error
            if status:
                raise RestdError(
                    failed(
                        Part.RESTD_GARBLED,
                        f"{self.where} broke off its answer to {path} (HTTP {status}): {reason}",
                    )
                ) from None
            detail = f"cannot connect to {self.where}: {reason}"
        raise RestdError(failed(Part.RESTD_UNREACHABLE, detail))


def _local_text(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


_STAMP_KEY = "skybot_last_update"
