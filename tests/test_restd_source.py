"""RestdSource against slurmrestd's recorded answers (tests/fixtures/slurm/restd/): the files
the poller reads; on 22.05 "no change" told for almost nothing and a changed answer read once;
on 24.x states read each poll, changed jobs by id and whole reads streamed to the file."""

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
from scheduler.slurm.digester import PollDigester
from scheduler.slurm.restd import RestdClient
from scheduler.slurm.restd_source import RestdSource, source_for
from scheduler.slurm.wire import DigestRequest, LabLimits
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
        if "/job/" in request.path:
            return self.one_job(request.path.rstrip("/").rsplit("/", 1)[-1])
        name = fixture_name(request.path, request.query_string)
        if name == "jobs_unchanged" and self.changed:
            name = "jobs"
        return recorded(self.version, name) if name else web.Response(status=404)

    def one_job(self, job_id: str) -> web.Response:
        """`job/{id}`, as 24.11 answers it: the recorded jobs answer with that job only, or
        HTTP 404 "Invalid job id specified" (error 2017)."""
        document = json.loads(recorded(self.version, "jobs").body)  # type: ignore[arg-type]
        document["jobs"] = [j for j in document["jobs"] if str(j["job_id"]) == job_id]
        if not document["jobs"]:
            error = {"error_number": 2017, "error": "Invalid job id specified"}
            return web.json_response({"jobs": [], "errors": [error]}, status=404)
        return web.json_response(document)

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


def _before_24(server: _Restd) -> None:
    if server.version != "v0.0.38":
        pytest.skip("24.x reads jobs/state, not the whole queue with update_time")


async def test_a_quiet_cluster_is_one_no_change_answer_and_the_file_stays(
    restd: tuple[RestdSource, _Restd], tmp_path: Path
) -> None:
    source, server = restd
    _before_24(server)
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
    _before_24(server)
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


async def test_states_only_is_refused_before_24_so_the_poller_reads_whole(
    restd: tuple[RestdSource, _Restd], tmp_path: Path
) -> None:
    source, server = restd
    _before_24(server)
    with pytest.raises(SlurmCommandError):
        await source.job_states_into(tmp_path / "states.json")


async def test_24_reads_states_fetches_changed_jobs_by_id_and_streams_whole_reads(
    restd: tuple[RestdSource, _Restd], tmp_path: Path
) -> None:
    source, server = restd
    if server.version == "v0.0.38":
        pytest.skip("22.05 has no jobs/state")
    assert await source.jobs_changed() is None  # the poller compares the states answers
    assert not source.fetching.pending_listing and not source.fetching.id_lists
    await source.job_states_into(tmp_path / "states.json")
    states = json.loads((tmp_path / "states.json").read_bytes())["jobs"]
    assert [job["job_id"] for job in states] == ["122482", "122483"]

    assert await source.jobs_into(tmp_path / "one.json", "122483")
    assert [
        j.job_id for j in parse_squeue(json.loads((tmp_path / "one.json").read_bytes())).records
    ] == [122483]
    assert not await source.jobs_into(tmp_path / "gone.json", "99")  # slurmctld's 404
    with pytest.raises(SlurmCommandError):
        await source.jobs_into(tmp_path / "list.json", "122482,122483")

    whole = tmp_path / "squeue.json"
    assert await source.jobs_into(whole)
    assert whole.read_bytes() == recorded(server.version, "jobs").body  # as sent, unread
    assert not list(tmp_path.glob("*.partial"))
    assert [path for path in server.jobs_reads() if "update_time" in path] == []


def test_source_for_each_kind_of_cluster() -> None:
    restd = ClusterConfig("nova", source="slurmrestd", url="unix:/run/x.sock", token_file="/t")
    assert isinstance(source_for(restd), RestdSource)
    assert isinstance(source_for(ClusterConfig("vm")), CliSource)


async def test_the_pending_priorities_come_from_the_whole_jobs_read_the_worker_digests(
    restd: tuple[RestdSource, _Restd], tmp_path: Path
) -> None:
    """Through slurmrestd the limits poll reads no queue of its own: the pending jobs'
    priorities are the last whole jobs answer's, found by the poll worker as it digests it."""
    source, server = restd
    assert source.fetching.priorities_from_jobs
    path = tmp_path / "squeue.json"
    assert await source.jobs_into(path)
    await source.nodes_into(tmp_path / "nodes.json")
    reads = len(server.asked)
    request = DigestRequest(
        squeue=(path,),
        nodes=tmp_path / "nodes.json",
        sacct=None,
        limits=LabLimits((), {}, {}, "overcap"),
        base=None,
        nodes_command=source.nodes_command,
        jobs_command=source.fetching.command,
        priorities=True,
    )
    digest = PollDigester().digest(request)
    held = [j for j in parse_squeue(json.loads(path.read_bytes())).records if j.state == "PENDING"]
    assert held and digest.priorities == {j.job_id: 0 for j in held}
    assert digest.jobs == len(parse_squeue(json.loads(path.read_bytes())).records)
    source.priorities_read(digest.priorities)
    assert [(p.job_id, p.priority, p.factors) for p in source._priorities] == [
        (j.job_id, 0, None) for j in held
    ]
    assert len(server.asked) == reads  # no request of its own
