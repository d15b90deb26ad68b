"""The slurmrestd client's codec against a local aiohttp server that answers as 22.05's
(v0.0.38) and 24.11's (v0.0.42) slurmrestd were seen to (shapes recorded in
../shared/reference/slurmrestd-on-one-host.md and tests/fixtures/slurm/restd/): token file
reading and rotation, version choice, the two "no change" answers, and error messages. The
real daemons are in tests/test_restd_cluster.py."""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from scheduler.slurm.restd import RestdClient, RestdError
from scheduler.slurm.restd_token import TokenFile, TokenFileError, parse_token
from tests.support.restd_tokens import make_token, write_token


def test_a_token_file_names_its_user_and_may_be_bare() -> None:
    token = make_token("skybot", time.time() + 60)
    assert parse_token(f"SLURM_JWT={token}\n", "f").user == "skybot"
    assert parse_token(f"{token}\n", "f").headers() == {
        "X-SLURM-USER-NAME": "skybot",
        "X-SLURM-USER-TOKEN": token,
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "found 0"),
        ("SLURM_JWT=abc\n", "not a JWT"),
        ("SLURM_JWT=a.!!!.c\n", "cannot be read"),
        (f"SLURM_JWT=a.{base64.urlsafe_b64encode(b'{}').decode()}.c", "no 'sun' claim"),
    ],
)
def test_a_bad_token_file_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(TokenFileError, match=message):
        parse_token(text, "/etc/skybot/x.jwt")


def test_an_expired_token_says_so_with_the_remedy(tmp_path: Path) -> None:
    path = tmp_path / "t.jwt"
    write_token(path, make_token("skybot", time.time() - 5))
    with pytest.raises(TokenFileError, match=r"expired at .*mint a new one"):
        TokenFile(path).current()


def test_a_replaced_token_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "t.jwt"
    first, second = make_token("skybot", salt="one"), make_token("skybot", salt="two")
    write_token(path, first)
    tokens = TokenFile(path)
    assert tokens.current().token == first
    write_token(path, second)
    assert tokens.current().token == second


# -- a local server answering as slurmrestd -----------------------------------------------------

Handler = Callable[[web.Request], web.Response]


class FakeRestd:
    """Routes as slurmrestd serves them; records each request's path, query and user."""

    def __init__(self, version: str, accept: Callable[[str], bool]) -> None:
        self.version = version
        self.accept = accept
        self.requests: list[tuple[str, str, str]] = []
        self.routes: dict[str, Handler] = {}

    async def handle(self, request: web.Request) -> web.Response:
        # The query as sent (raw_path), not as aiohttp decodes it.
        query = request.raw_path.partition("?")[2]
        self.requests.append((request.path, query, request.headers.get("X-SLURM-USER-NAME", "")))
        if not self.accept(request.headers.get("X-SLURM-USER-TOKEN", "")):
            return web.Response(status=401, text="Authentication failure")
        handler = self.routes.get(request.path)
        if handler is None:
            return web.Response(status=404)
        return handler(request)


def answer(document: dict[str, Any], status: int = 200) -> Handler:
    return lambda _request: web.json_response(document, status=status)


@pytest.fixture
async def restd(tmp_path: Path) -> AsyncIterator[tuple[FakeRestd, Path, str]]:
    """A fake slurmrestd on a unix socket, and the token file it accepts."""
    token_file = tmp_path / "token.jwt"
    write_token(token_file, make_token("skybot", time.time() + 600, salt="good"))
    fake = FakeRestd("v0.0.38", lambda token: token.endswith(".good"))
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    socket = tmp_path / "restd.sock"
    await web.UnixSite(runner, str(socket)).start()
    yield fake, token_file, f"unix:{socket}"
    await runner.cleanup()


PING: dict[str, Any] = {"meta": {}, "errors": [], "pings": []}


async def test_a_ping_answered_up_is_answered_on_both_versions(
    restd: tuple[FakeRestd, Path, str],
) -> None:
    """The doctor's and the back-off's ping (issue 38): "pings" was dropped by the decoder
    of Slurm records, so an answered ping read as unanswered."""
    fake, token_file, address = restd
    fake.routes["/slurm/v0.0.38/ping"] = answer({**PING, "pings": [{"ping": "UP"}]})
    async with RestdClient(address, token_file) as client:
        assert await client.answers_ping() is True
    fake.routes["/slurm/v0.0.38/ping"] = answer({**PING, "pings": [{"ping": "DOWN"}]})
    async with RestdClient(address, token_file) as client:
        assert await client.answers_ping() is False


async def test_2205_no_change_is_http_304_and_keeps_the_time(
    restd: tuple[FakeRestd, Path, str],
) -> None:
    fake, token_file, address = restd
    fake.routes["/slurm/v0.0.38/ping"] = answer(PING)
    fake.routes["/slurm/v0.0.38/jobs"] = lambda request: (
        web.Response(status=304)
        if "update_time" in request.query
        else web.json_response({"jobs": [{"job_id": 7}], "errors": []})
    )
    clock = iter([1000.0, 1010.0])
    async with RestdClient(address, token_file, clock=lambda: next(clock)) as client:
        full = await client.jobs()
        assert full.document is not None and full.document["jobs"] == [{"job_id": 7}]
        # No last_update in 22.05's answers: the client's clock, less a second's margin.
        assert full.update_time == 999
        unchanged = await client.jobs(full.update_time)
    assert unchanged.document is None and unchanged.update_time == 999
    assert fake.requests[-1] == ("/slurm/v0.0.38/jobs", "update_time=999", "skybot")


async def test_24_no_change_is_an_empty_list_stamped_zero(
    restd: tuple[FakeRestd, Path, str],
) -> None:
    fake, token_file, address = restd
    fake.routes["/slurm/v0.0.42/ping/"] = answer(PING)
    stamped = {"set": True, "infinite": False, "number": 1796133744}
    zero = {"set": True, "infinite": False, "number": 0}
    fake.routes["/slurm/v0.0.42/jobs/"] = lambda request: web.json_response(
        {"jobs": [], "last_update": zero if "update_time" in request.query else stamped}
    )
    async with RestdClient(address, token_file) as client:
        assert await client.version() == "v0.0.42"
        empty_queue = await client.jobs()
        # An empty queue has a time: it is a document, not "no change".
        assert empty_queue.document == {"jobs": []}
        assert empty_queue.update_time == 1796133744
        unchanged = await client.jobs(empty_queue.update_time)
    assert unchanged.document is None and unchanged.update_time == 1796133744
    assert fake.requests[-1][:2] == ("/slurm/v0.0.42/jobs/", "flags=ALL&update_time=1796133744")


async def test_the_newest_version_skybot_reads_is_chosen(
    restd: tuple[FakeRestd, Path, str],
) -> None:
    fake, token_file, address = restd
    for version in ("v0.0.40", "v0.0.41"):
        fake.routes[f"/slurm/{version}/ping/"] = answer(PING)
    async with RestdClient(address, token_file) as client:
        assert await client.version() == "v0.0.41"


async def test_2205_accounting_times_are_text_with_encoded_colons(
    restd: tuple[FakeRestd, Path, str],
) -> None:
    fake, token_file, address = restd
    fake.routes["/slurm/v0.0.38/ping"] = answer(PING)
    no_jobs = {"jobs": [], "errors": [{"error_number": 9003, "error": "Nothing found"}]}
    fake.routes["/slurmdb/v0.0.38/jobs"] = answer(no_jobs)
    start = time.mktime((2026, 12, 1, 14, 2, 24, 0, 0, -1))
    async with RestdClient(address, token_file) as client:
        # "No job matched" is an answer, not an error.
        assert await client.accounting_jobs(start, start + 60) == {"jobs": []}
    assert fake.requests[-1][1] == (
        "start_time=2026-12-01T14%3A02%3A24&end_time=2026-12-01T14%3A03%3A24"
    )


async def test_a_rotated_token_is_sent_from_the_next_request(
    restd: tuple[FakeRestd, Path, str],
) -> None:
    fake, token_file, address = restd
    fake.routes["/slurm/v0.0.38/ping"] = answer(PING)
    fake.routes["/slurm/v0.0.38/nodes"] = answer({"nodes": []})
    async with RestdClient(address, token_file) as client:
        await client.nodes()
        write_token(token_file, make_token("skybot", time.time() + 600, salt="bad"))
        with pytest.raises(RestdError, match=rf"refused the token in {token_file} \(HTTP 401"):
            await client.nodes()
        write_token(token_file, make_token("skybot", time.time() + 600, salt="good"))
        assert (await client.nodes()).document == {"nodes": []}


@pytest.mark.parametrize(
    ("status", "document", "message"),
    [
        (
            511,
            {"errors": [{"description": "Protocol authentication error", "error_number": 1007}]},
            r"slurmctld refused the token .*HTTP 511: Protocol authentication error.*scontrol",
        ),
        (
            500,
            {"errors": [{"description": "Unable to query jobs", "source": "slurm_load_jobs"}]},
            r"/slurm/v0.0.38/jobs failed \(HTTP 500\): Unable to query jobs \(slurm_load_jobs\)",
        ),
        (
            200,
            {"jobs": [], "errors": [{"description": "Invalid user", "error_number": 2002}]},
            r"jobs reported an error: Invalid user",
        ),
    ],
)
async def test_refusals_say_what_slurm_said(
    restd: tuple[FakeRestd, Path, str], status: int, document: dict[str, Any], message: str
) -> None:
    fake, token_file, address = restd
    fake.routes["/slurm/v0.0.38/ping"] = answer(PING)
    fake.routes["/slurm/v0.0.38/jobs"] = answer(document, status)
    async with RestdClient(address, token_file) as client:
        with pytest.raises(RestdError, match=message):
            await client.jobs()


async def test_no_daemon_is_a_clear_error(tmp_path: Path) -> None:
    token_file = tmp_path / "t.jwt"
    write_token(token_file, make_token("skybot", time.time() + 60))
    async with RestdClient(f"unix:{tmp_path}/none.sock", token_file) as client:
        with pytest.raises(RestdError, match=r"cannot connect to slurmrestd at unix:.*none\.sock"):
            await client.jobs()
    async with RestdClient("http://127.0.0.1:9", token_file) as client:
        with pytest.raises(
            RestdError, match=r"cannot connect to slurmrestd at http://127\.0\.0\.1:9"
        ):
            await client.nodes()


async def test_a_daemon_without_a_version_skybot_reads_says_so(
    restd: tuple[FakeRestd, Path, str],
) -> None:
    _, token_file, address = restd
    async with RestdClient(address, token_file) as client:
        with pytest.raises(RestdError, match="serves none of the API versions skybot reads"):
            await client.jobs()


async def test_2205_has_no_job_states(restd: tuple[FakeRestd, Path, str]) -> None:
    fake, token_file, address = restd
    fake.routes["/slurm/v0.0.38/ping"] = answer(PING)
    async with RestdClient(address, token_file) as client:
        with pytest.raises(RestdError, match="no jobs/state"):
            await client.job_states()


async def test_ping_and_diag_are_read_whole(restd: tuple[FakeRestd, Path, str]) -> None:
    """The record decoder keeps only jobs and nodes: the ping's `pings` and diag's
    `statistics` were dropped, so the ping never read UP (recovery waited out the back-off)
    and the DBD queue was never known."""
    fake, token_file, address = restd
    fake.routes["/slurm/v0.0.42/ping/"] = answer({"pings": [{"pinged": "UP"}], "errors": []})
    fake.routes["/slurm/v0.0.42/diag/"] = answer({"statistics": {"dbd_agent_queue_size": 0}})
    async with RestdClient(address, token_file) as client:
        assert await client.answers_ping() is True
        assert (await client.controller_diag()).dbd_queue_size == 0


async def test_a_daemon_upgraded_under_skybot_is_asked_its_version_again(
    restd: tuple[FakeRestd, Path, str],
) -> None:
    fake, token_file, address = restd
    fake.routes["/slurm/v0.0.38/ping"] = answer(PING)
    fake.routes["/slurm/v0.0.38/nodes"] = answer({"nodes": []})
    async with RestdClient(address, token_file) as client:
        assert await client.version() == "v0.0.38"
        fake.routes.clear()  # 24.11 now: v0.0.38 is gone
        fake.routes["/slurm/v0.0.42/ping/"] = answer(PING)
        fake.routes["/slurm/v0.0.42/nodes/"] = answer({"nodes": [], "last_update": {"number": 5}})
        with pytest.raises(RestdError, match=r"does not serve /slurm/v0.0.38/nodes \(HTTP 404\)"):
            await client.nodes()
        assert (await client.nodes()).document == {"nodes": []}
