"""slurmrestd's recorded answers (tests/fixtures/slurm/restd/, by its record.sh from the real
22.05 and 24.11 daemons) served back to the client: each parses into the records the CLI path
makes, "no change" is told from an empty queue, and a refused token says so."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from core.slurm_json import parse_sacct, parse_sinfo, parse_squeue
from scheduler.slurm.restd import RestdClient, RestdError
from tests.support.restd_recordings import fixture_name, recorded
from tests.support.restd_tokens import make_token, write_token

NAME = "skybot-restd-fixture"


@pytest.fixture(params=["v0.0.38", "v0.0.42"])
async def served(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[RestdClient, list[bool]]]:
    """A client of a server answering with one version's recordings; set the list's one item
    to answer every request with the recorded refusal."""
    version: str = request.param
    refuse: list[bool] = [False]

    async def handle(request: web.Request) -> web.Response:
        if request.path.rstrip("/").endswith("/ping"):
            ok = request.path.startswith(f"/slurm/{version}/")
            return web.json_response({"pings": []}) if ok else web.Response(status=404)
        if refuse[0]:
            return recorded(version, "refused_token")
        name = fixture_name(request.path, request.query_string)
        return recorded(version, name) if name else web.Response(status=404)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.UnixSite(runner, str(tmp_path / "s.sock")).start()
    token = tmp_path / "t.jwt"
    write_token(token, make_token("skybot", time.time() + 600))
    async with RestdClient(f"unix:{tmp_path}/s.sock", token) as client:
        yield client, refuse
    await runner.cleanup()


async def test_recorded_answers_parse_into_the_cli_records(
    served: tuple[RestdClient, list[bool]],
) -> None:
    client = served[0]
    jobs = await client.jobs()
    assert jobs.document is not None
    parsed = parse_squeue(jobs.document)
    assert not parsed.warnings
    mine = {job.user: job for job in parsed.records if job.name == NAME}
    assert mine["alice"].state == "PENDING" and mine["alice"].gpus_by_type == {"a40": 1}
    assert mine["bob"].state == "RUNNING" and sum(mine["bob"].gpus_by_type.values()) == 2
    nodes = await client.nodes()
    assert nodes.document is not None
    totals = {node.name: node.gpus_total for node in parse_sinfo(nodes.document).records}
    assert totals["clippy"] == {"a40": 4} and totals["xaea-12"] == {"rtx_6000": 4}
    ended = parse_sacct(await client.accounting_jobs(time.time() - 60, time.time()))
    assert not ended.warnings
    assert {(job.user, job.state) for job in ended.records if job.name == NAME} >= {
        ("dave", "COMPLETED")
    }


async def test_recorded_no_change_answers_are_no_change(
    served: tuple[RestdClient, list[bool]],
) -> None:
    client = served[0]
    first = await client.jobs()
    assert first.document is not None
    assert (await client.jobs(first.update_time)).document is None
    assert (await client.nodes(first.update_time)).document is None


async def test_a_recorded_refusal_names_the_token(served: tuple[RestdClient, list[bool]]) -> None:
    client, refuse = served
    await client.version()
    refuse[0] = True
    with pytest.raises(RestdError, match="token in"):
        await client.jobs()
