"""RestdSource against slurmrestd's recorded answers (tests/fixtures/slurm/restd/): the files
the poller reads, "no change" told for almost nothing, a changed answer read once."""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from core.cluster_config import ClusterConfig
from core.slurm_json import parse_sacct, parse_squeue
from scheduler.slurm.cli_source import CliSource
from scheduler.slurm.commands import SlurmCommandError
from scheduler.slurm.restd import RestdClient
from scheduler.slurm.restd_source import RestdSource, source_for
from tests.support.restd_recordings import fixture_name, recorded
from tests.support.restd_tokens import make_token, write_token


class _Restd:
    """A slurmrestd serving one version's recordings; `changed` says whether a jobs read
    with update_time gets the whole queue (something changed) or the no-change answer."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.changed = False
        self.asked: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.asked.append(request.path_qs)
        if request.path.rstrip("/").endswith("/ping"):
            ok = request.path.startswith(f"/slurm/{self.version}/")
            return web.json_response({"pings": []}) if ok else web.Response(status=404)
        name = fixture_name(request.path, request.query_string)
        if name == "jobs_unchanged" and self.changed:
            name = "jobs"
        return recorded(self.version, name) if name else web.Response(status=404)

    def jobs_reads(self) -> list[str]:
        return [path for path in self.asked if "/jobs" in path and "slurmdb" not in path]


@pytest.fixture(params=["v0.0.38", "v0.0.42"])
async def restd(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[RestdSource, _Restd]]:
    server = _Restd(request.param)
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.UnixSite(runner, str(tmp_path / "s.sock")).start()
    token = tmp_path / "t.jwt"
    write_token(token, make_token("skybot", time.time() + 600))
    source = RestdSource(RestdClient(f"unix:{tmp_path}/s.sock", token))
    yield source, server
    await source.close()
    await runner.cleanup()


async def test_a_quiet_cluster_is_one_no_change_answer_and_the_file_stays(
    restd: tuple[RestdSource, _Restd], tmp_path: Path
) -> None:
    source, server = restd
    path = tmp_path / "squeue.json"
    assert await source.jobs_into(path)
    written = os.stat(path).st_ino
    assert parse_squeue(json.loads(path.read_bytes())).records

    assert await source.jobs_changed() is False
    # The periodic read asks with update_time too, and leaves last time's file in place.
    assert await source.jobs_into(path)
    assert os.stat(path).st_ino == written
    assert all("update_time=" in read for read in server.jobs_reads()[1:])


async def test_a_changed_answer_is_read_once_for_the_probe_and_the_poll(
    restd: tuple[RestdSource, _Restd], tmp_path: Path
) -> None:
    source, server = restd
    path = tmp_path / "squeue.json"
    await source.jobs_into(path)
    path.unlink()
    server.changed = True
    assert await source.jobs_changed() is True
    assert await source.jobs_changed() is True  # told again, not asked again
    reads = len(server.jobs_reads())
    await source.jobs_into(path)
    assert len(server.jobs_reads()) == reads == 2  # the poll took the probe's answer
    assert parse_squeue(json.loads(path.read_bytes())).records


async def test_ended_jobs_are_only_those_in_a_final_state(
    restd: tuple[RestdSource, _Restd], tmp_path: Path
) -> None:
    source, _ = restd
    path = tmp_path / "sacct.json"
    await source.ended_jobs_into(path, time.time() - 600, time.time())
    states = {job.state for job in parse_sacct(json.loads(path.read_bytes())).records}
    assert states and "RUNNING" not in states  # the recordings hold running jobs too


async def test_states_only_is_refused_so_the_poller_reads_whole(
    restd: tuple[RestdSource, _Restd], tmp_path: Path
) -> None:
    source, _ = restd
    with pytest.raises(SlurmCommandError):
        await source.job_states_into(tmp_path / "states.json")


def test_source_for_each_kind_of_cluster() -> None:
    restd = ClusterConfig("nova", source="slurmrestd", url="unix:/run/x.sock", token_file="/t")
    assert isinstance(source_for(restd), RestdSource)
    assert isinstance(source_for(ClusterConfig("vm")), CliSource)


async def test_the_pending_priorities_come_from_the_jobs_document_once_per_document(
    restd: tuple[RestdSource, _Restd], tmp_path: Path
) -> None:
    """Through slurmrestd the limits poll reads no queue of its own: the pending jobs'
    priorities are the last jobs answer's, decoded again only when a new answer came."""
    source, server = restd
    assert await source._pending_priorities() == ()  # no jobs read yet
    path = tmp_path / "squeue.json"
    assert await source.jobs_into(path)
    pending = await source._pending_priorities()
    held = [j for j in parse_squeue(json.loads(path.read_bytes())).records if j.state == "PENDING"]
    assert held and [(p.job_id, p.priority, p.factors) for p in pending] == [
        (j.job_id, 0, None) for j in held
    ]
    reads = len(server.asked)
    assert await source._pending_priorities() == pending
    assert len(server.asked) == reads  # no request of its own
