"""slurmrestd misbehaving, through a local fake (aiohttp on a unix socket) serving the recorded
answers of 22.05's and 24.11's daemons until a fault is switched on for every path: the real
poller and RestdSource read it. Each fault must be one warning per episode (no traceback),
the source marked failing with back-off (only pings while backing off), the part that failed
in users' words and in /readyz, and the cluster current again one poll after slurmrestd
answers properly."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web
from msgspec.structs import replace

from bot.config import DatabaseConfig, SlurmConfig, load_config
from bot.health import slurm_check
from core.slurm_failure import Part, part_of
from core.snapshot import ClusterSnapshot
from core.view import ClusterView
from handlers.commands.common import outage_words
from scheduler.slurm.poller import SlurmPoller
from scheduler.slurm.restd import RestdClient
from scheduler.slurm.restd_source import RestdSource
from store.snapshots import load_snapshot
from store.writer import StoreWriter
from tests.support.restd_recordings import fixture_name, recorded
from tests.support.restd_tokens import make_token, write_token

POLL = 5.0
TIMEOUT = 0.5
NGINX_500 = (
    b"<html>\r\n<head><title>500 Internal Server Error</title></head>\r\n<body>\r\n"
    b"<center><h1>500 Internal Server Error</h1></center>\r\n<hr><center>nginx</center>\r\n"
)
Fault = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _body(status: int, body: bytes, content_type: str = "application/json") -> Fault:
    async def answer(_request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, body=body, content_type=content_type)

    return answer


async def _truncated(_request: web.Request) -> web.StreamResponse:
    jobs = (Path(__file__).parent / "fixtures/slurm/restd/v0.0.42/jobs.json").read_bytes()
    return web.Response(body=jobs[: len(jobs) // 2], content_type="application/json")


async def _dropped(request: web.Request) -> web.StreamResponse:
    """Headers promising 100,000 bytes, ten of them, then the connection closed."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.content_length = 100_000
    await response.prepare(request)
    await response.write(b'{"jobs": [')
    assert request.transport is not None
    request.transport.close()
    return response


async def _stalled(_request: web.Request) -> web.StreamResponse:
    await asyncio.sleep(TIMEOUT * 4)
    return web.json_response({"jobs": []})


# fault -> (its answer, the part that must be blamed, words users must read)
FAULTS: dict[str, tuple[Fault, Part, str]] = {
    "truncated JSON, 200": (_truncated, Part.RESTD_GARBLED, "cannot be read"),
    "HTML, 200": (
        _body(200, b"<!DOCTYPE html>\n<html><title>Welcome to nginx!</title>", "text/html"),
        Part.NOT_RESTD,
        "other than Slurm's REST API (slurmrestd) answered",
    ),
    "HTML, 500": (
        _body(500, NGINX_500, "text/html"),
        Part.NOT_RESTD,
        "other than Slurm's REST API",
    ),
    "null": (_body(200, b"null"), Part.RESTD_GARBLED, "cannot be read"),
    "NaN": (_body(200, b"NaN"), Part.RESTD_GARBLED, "cannot be read"),
    "deep nesting": (_body(200, b"[" * 200_000), Part.RESTD_GARBLED, "cannot be read"),
    "wrong shape": (_body(200, b'{"jobs": 7, "nodes": "x"}'), Part.RESTD_GARBLED, "cannot"),
    "dropped mid-answer": (_dropped, Part.RESTD_GARBLED, "cannot be read"),
    "stalled past the timeout": (_stalled, Part.RESTD_UNREACHABLE, "is not answering"),
    "401": (
        _body(401, b"Authentication failure", "text/plain"),
        Part.TOKEN_REFUSED,
        "refuses skybot's token",
    ),
    "403": (_body(403, b'{"errors": []}'), Part.TOKEN_REFUSED, "refuses skybot's token"),
    "502": (_body(502, b"Bad Gateway", "text/plain"), Part.RESTD_UNREACHABLE, "not answering"),
    "504": (
        _body(504, b"<html><title>504 Gateway Time-out</title></html>", "text/html"),
        Part.RESTD_UNREACHABLE,
        "not answering",
    ),
}


@dataclass
class FakeRestd:
    """Answers as `version`'s slurmrestd did (tests/fixtures/slurm/restd/), or with `fault`
    for every path while one is set. Every path asked is kept."""

    version: str
    fault: Fault | None = None
    # The fault only for paths starting with this (e.g. accounting's, "/slurmdb/").
    only: str = "/"
    asked: list[str] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.asked.append(request.path)
        if self.fault is not None and request.path.startswith(self.only):
            return await self.fault(request)
        if request.path.rstrip("/").endswith("/ping"):
            if not request.path.startswith(f"/slurm/{self.version}/"):
                return web.Response(status=404)
            return web.json_response({"pings": [{"ping": "UP", "pinged": "UP"}]})
        if request.path.rstrip("/").endswith("/diag"):
            return web.json_response({"statistics": {"dbd_agent_queue_size": 0}})
        name = fixture_name(request.path, request.query_string)
        return recorded(self.version, name) if name else web.Response(status=404)

    def since(self, count: int) -> list[str]:
        """What was asked after the first `count` requests, by its last path part."""
        return [path.rstrip("/").rsplit("/", 1)[-1] for path in self.asked[count:]]


@dataclass
class Rig:
    fake: FakeRestd
    poller: SlurmPoller
    writer: StoreWriter
    clock: list[float]
    token: Path
    runner: web.AppRunner

    async def poll(self) -> bool:
        self.clock[0] += POLL
        return await self.poller.poll_jobs()

    async def snapshot(self) -> ClusterSnapshot:
        return await self.writer.run(load_snapshot, self.poller.cluster)


@pytest.fixture(params=["v0.0.38", "v0.0.42"])
async def rig(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Rig]:
    fake = FakeRestd(request.param)
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.UnixSite(runner, str(tmp_path / "restd.sock")).start()
    token = tmp_path / "token.jwt"
    write_token(token, make_token("skybot", time.time() + 600))
    config = replace(
        load_config(None),
        slurm=SlurmConfig(poll_seconds=POLL),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
    )
    writer = StoreWriter(config.database.path)
    clock = [time.time()]
    client = RestdClient(f"unix:{tmp_path}/restd.sock", token, timeout=TIMEOUT)
    source = RestdSource(client)
    nova = replace(config.default_cluster, name="nova")
    poller = SlurmPoller(nova, config, writer, clock=lambda: clock[0], source=source)
    yield Rig(fake, poller, writer, clock, token, runner)
    await poller.close()
    writer.close()
    await runner.cleanup()


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("name", list(FAULTS))
async def test_a_misbehaving_slurmrestd_is_a_named_failure_said_once_and_recovered_from(
    rig: Rig, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    fault, part, words = FAULTS[name]
    caplog.set_level(logging.INFO, logger="scheduler.slurm.poller")
    assert await rig.poll()
    caplog.clear()
    rig.fake.fault = fault
    # A change probe meeting the fault is not a poll: no exception, no warning.
    assert await rig.poller.probe() is False
    failed_polls = [await rig.poll() for _ in range(6)]
    assert failed_polls == [False] * 6

    warnings = _warnings(caplog)
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    message = warnings[0].getMessage()
    assert "\n" not in message and warnings[0].exc_info is None
    assert "nova" in message and part.value in message

    snapshot = await rig.snapshot()
    status = snapshot.source("slurm")
    assert status.failing and status.error is not None and part_of(status.error) is part
    told = outage_words("slurm", status.error, status.error_at, "30 s ago", rig.clock[0])
    assert words in told and "slurmctld" not in told
    ready = slurm_check(ClusterView(snapshot, ()), rig.clock[0], 600.0)
    assert not ready.ok and words in ready.detail

    # Backing off: after the six tries (5, 10, 20 s waits), only pings until the wait ends.
    asked = len(rig.fake.asked)
    assert await rig.poll() is False
    assert rig.fake.since(asked) == ["ping"]

    rig.fake.fault = None
    caplog.clear()
    assert await rig.poll() is True, "current one poll after slurmrestd answers properly"
    assert not (await rig.snapshot()).source("slurm").failing
    assert [r.getMessage() for r in caplog.records if "answered again" in r.getMessage()]
    assert not _warnings(caplog)


async def test_an_expired_token_and_a_daemon_gone_are_told_apart(
    rig: Rig, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    assert await rig.poll()
    write_token(rig.token, make_token("skybot", time.time() - 5))
    assert not await rig.poll()
    error = (await rig.snapshot()).source("slurm").error or ""
    assert part_of(error) is Part.TOKEN_EXPIRED
    assert "token for Slurm's REST API (slurmrestd) has expired" in outage_words(
        "slurm", error, None, "1 min", 0
    )

    # The daemon gone: its connections closed (how many skybot kept open is aiohttp's
    # business) and its socket removed, so nothing listens.
    await rig.runner.cleanup()
    (tmp_path / "restd.sock").unlink(missing_ok=True)
    write_token(rig.token, make_token("skybot", time.time() + 600))
    assert not await rig.poll()
    error = (await rig.snapshot()).source("slurm").error or ""
    assert part_of(error) is Part.RESTD_UNREACHABLE and "cannot connect" in error
    assert len(_warnings(caplog)) == 2  # a new kind of failure is said again


async def test_accounting_failing_behind_slurmrestd_is_said_once_and_not_blamed_on_slurmdbd(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """A proxy's 502 for accounting's paths only: the live view stays current, job ends wait,
    one warning, and the words name slurmrestd rather than slurmdbd."""
    caplog.set_level(logging.INFO, logger="scheduler.slurm.poller")
    assert await rig.poll()
    rig.fake.fault, rig.fake.only = FAULTS["502"][0], "/slurmdb/"
    assert [await rig.poll() for _ in range(4)] == [True] * 4
    warnings = [r.getMessage() for r in _warnings(caplog)]
    assert len(warnings) == 1 and warnings[0].startswith("sacct on nova failed"), warnings
    status = (await rig.snapshot()).source("accounting")
    assert status.failing and part_of(status.error or "") is Part.RESTD_UNREACHABLE
    told = outage_words("accounting", status.error or "", status.error_at, "", rig.clock[0])
    assert "is not answering" in told and "reported late" in told and "slurmdbd" not in told
    rig.fake.fault = None
    assert await rig.poll()
    assert not (await rig.snapshot()).source("accounting").failing
    assert any("sacct on nova answered again" in r.getMessage() for r in caplog.records)
