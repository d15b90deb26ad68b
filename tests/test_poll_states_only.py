"""Where squeue has --only-job-state (24.05+), a poll fetches full records only for jobs
that are new or changed state, and the snapshot is the same as a full poll's.

No cluster: slurm.bin_dir holds a stand-in squeue that answers from a v0.0.42 document as
24.11's does: ids and states for --only-job-state, the listed jobs for --jobs=, and for a
single id slurmctld no longer holds, exit 1 and "Invalid job id specified" (24.11.5).
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from core.job_output import host_names, with_host_names
from core.records import Job
from core.slurm_decode import decode_slurm_json
from core.slurm_json import parse_sinfo, parse_squeue
from scheduler.slurm import job_reads
from scheduler.slurm.digester import PollDigester
from scheduler.slurm.job_reads import (
    ONE_BY_ONE_AT_ONCE,
    ONE_BY_ONE_MAX,
    _job_id_lists,
)
from scheduler.slurm.poller import SlurmPoller
from scheduler.slurm.wire import ChangedJobsRequest
from store.snapshots import load_snapshot, load_source_status
from store.writer import StoreWriter
from tests.support.factories import CLUSTER
from tests.support.fake_squeue import (
    FIXTURES,
    SHEBANG,
    SQUEUE,
    _add_pending_jobs,
    _calls,
    _config,
    _fetches,
    _set_state,
    _slurm,
)


@dataclass
class FakeSlurm:
    """A poller on a 24.11-like fake squeue (see _slurm), with its store and the squeue
    document the fake prints (written back to change what it lists)."""

    bin_dir: Path
    writer: StoreWriter
    poller: SlurmPoller
    document: dict[str, Any]


@pytest.fixture
async def fake(tmp_path: Path) -> AsyncIterator[FakeSlurm]:
    bin_dir = tmp_path / "bin"
    _slurm(bin_dir)
    writer = StoreWriter(tmp_path / "skybot.db")
    config = _config(tmp_path, bin_dir)
    poller = SlurmPoller(config.default_cluster, config, writer)
    document = json.loads((bin_dir / "squeue.json").read_text())
    try:
        yield FakeSlurm(bin_dir, writer, poller, document)
    finally:
        await poller.close()
        writer.close()


async def test_only_new_and_changed_jobs_are_fetched(fake: FakeSlurm) -> None:
    bin_dir, writer, poller, document = fake.bin_dir, fake.writer, fake.poller, fake.document
    ids = [job["job_id"] for job in document["jobs"]]
    plain = [j["job_id"] for j in document["jobs"] if not j["array_job_id"]["number"]]
    assert await poller.poll_jobs()
    # The first poll reads every record at once, without a --jobs= list.
    assert _calls(bin_dir) == ["--all --only-job-state --json", "--all --json"]
    assert len((await writer.run(load_snapshot, CLUSTER)).jobs) == len(ids)

    assert await poller.poll_jobs()
    # Nothing changed: nothing is read again, arrays included (their records are matched
    # to the "14_0", "13_1" ... "13_3" keys squeue's states listing prints).
    assert _fetches(bin_dir) == []

    changed = plain[0]
    _set_state(document, changed, "COMPLETING")
    (bin_dir / "squeue.json").write_text(json.dumps(document))
    assert await poller.poll_jobs()
    assert _fetches(bin_dir) == [str(changed)]
    assert await _snapshot_is(writer, document)

    # A started task of an array changes state: its own record is read (under the job
    # id it was given when it started), no other's.
    task = next(j for j in document["jobs"] if j["array_task_id"]["set"])
    _set_state(document, task["job_id"], "COMPLETING")
    (bin_dir / "squeue.json").write_text(json.dumps(document))
    assert await poller.poll_jobs()
    assert _fetches(bin_dir) == [str(task["job_id"])]
    assert await _snapshot_is(writer, document)

    gone = ids[1]
    document["jobs"] = [job for job in document["jobs"] if job["job_id"] != gone]
    (bin_dir / "squeue.json").write_text(json.dumps(document))
    assert await poller.poll_jobs()
    assert _fetches(bin_dir) == []
    snapshot = await writer.run(load_snapshot, CLUSTER)
    assert gone not in {job.job_id for job in snapshot.jobs}
    assert len(snapshot.jobs) == len(ids) - 1


async def test_a_task_leaving_an_arrays_pending_record_refetches_that_record(
    fake: FakeSlurm,
) -> None:
    """Task 1 of pending array 13 ("1-3") starts as job 19: 24.11 lists it as "19_1"
    instead of "13_1", and "13_2", "13_3" stay PENDING. The pending record now says "2-3"
    although none of its listed tasks changed state: it is fetched again with the new task,
    and nothing else is; once read, a quiet poll fetches nothing."""
    bin_dir, writer, poller, document = fake.bin_dir, fake.writer, fake.poller, fake.document
    assert await poller.poll_jobs()
    pending = next(j for j in document["jobs"] if j["job_id"] == 13)
    assert pending["array_task_string"] == "1-3"
    started = copy.deepcopy(next(j for j in document["jobs"] if j["job_id"] == 14))
    started["job_id"] = 19
    started["array_task_id"] = {"set": True, "infinite": False, "number": 1}
    pending["array_task_string"] = "2-3"
    document["jobs"].append(started)
    (bin_dir / "squeue.json").write_text(json.dumps(document))
    _calls(bin_dir)
    assert await poller.poll_jobs()
    assert sorted(_fetches(bin_dir)) == ["13", "19"]
    assert await _snapshot_is(writer, document)
    assert await poller.poll_jobs()
    assert _fetches(bin_dir) == []


async def test_a_few_changed_jobs_are_fetched_one_id_at_a_time(fake: FakeSlurm) -> None:
    """Up to ONE_BY_ONE_MAX: one `squeue --json --jobs=ID` each (24.11: a cheap
    REQUEST_JOB_INFO_SINGLE, where a list costs slurmctld a read of every job), an array by
    its array id; the snapshot is the full parse's all the same."""
    bin_dir, writer, poller, document = fake.bin_dir, fake.writer, fake.poller, fake.document
    assert await poller.poll_jobs()
    _calls(bin_dir)
    task = next(j for j in document["jobs"] if j["array_task_id"]["set"])
    _set_state(document, task["job_id"], "COMPLETING")
    _set_state(document, 8, "COMPLETING")
    _add_pending_jobs(document, range(1000, 1000 + ONE_BY_ONE_MAX - 2))
    (bin_dir / "squeue.json").write_text(json.dumps(document))
    (bin_dir / "fetch-seconds").write_text("0.3")  # long enough to overlap, unbounded
    assert await poller.poll_jobs()
    fetched = [str(i) for i in range(1000, 1000 + ONE_BY_ONE_MAX - 2)]
    array = str(task["job_id"])
    states, *fetches = _calls(bin_dir)
    assert states == "--all --only-job-state --json"
    # In any order: a few run at once.
    assert sorted(fetches) == sorted(f"--all --json --jobs={i}" for i in ["8", array, *fetched])
    assert await _snapshot_is(writer, document)
    # At most ONE_BY_ONE_AT_ONCE squeue processes at a time.
    at_once = [int(n) for n in (bin_dir / "at-once.log").read_text().split()]
    assert len(at_once) == ONE_BY_ONE_MAX and max(at_once) <= ONE_BY_ONE_AT_ONCE


async def test_more_changed_jobs_than_that_are_fetched_in_one_list(fake: FakeSlurm) -> None:
    bin_dir, writer, poller, document = fake.bin_dir, fake.writer, fake.poller, fake.document
    assert await poller.poll_jobs()
    _calls(bin_dir)
    new = range(1000, 1000 + ONE_BY_ONE_MAX + 1)
    _add_pending_jobs(document, new)
    (bin_dir / "squeue.json").write_text(json.dumps(document))
    assert await poller.poll_jobs()
    assert _fetches(bin_dir) == [",".join(str(i) for i in new)]
    assert await _snapshot_is(writer, document)


async def test_a_job_purged_before_its_fetch_is_not_listed_and_the_poll_succeeds(
    fake: FakeSlurm,
) -> None:
    """Listed by the states query, gone from slurmctld (MinJobAge) by its own fetch: 24.11's
    squeue exits 1, "Invalid job id specified". That job is not listed now; the poll, and the
    other jobs' fetches, stand."""
    bin_dir, writer, poller, document = fake.bin_dir, fake.writer, fake.poller, fake.document
    assert await poller.poll_jobs()
    _calls(bin_dir)
    _set_state(document, 8, "COMPLETING")
    (bin_dir / "squeue.json").write_text(json.dumps(document))
    (bin_dir / "states-extra.json").write_text(
        json.dumps([{"job_id": "4242", "state": ["RUNNING"]}])
    )
    assert await poller.poll_jobs()
    assert sorted(_fetches(bin_dir)) == ["4242", "8"]
    assert await _snapshot_is(writer, document)
    assert not (await writer.run(load_source_status, CLUSTER, "slurm")).failing
    # Still listed: asked for again, as any job listed but not fetched is.
    assert await poller.poll_jobs()
    assert _fetches(bin_dir) == ["4242"]


async def test_a_purged_job_alone_in_the_last_list_does_not_fail_the_poll(
    tmp_path: Path,
) -> None:
    """Lists are cut at the command line's limit, so the last may name one id, which squeue
    asks for as a single job: purged, it is not listed now, as in a longer list."""
    bin_dir = tmp_path / "bin"
    _slurm(bin_dir)
    writer = StoreWriter(tmp_path / "skybot.db")
    config = _config(tmp_path, bin_dir)
    poller = SlurmPoller(config.default_cluster, config, writer)
    purged = [str(job_id) for job_id in range(1_000_000, 1_012_501)]
    assert "," not in _job_id_lists(purged)[-1]
    try:
        assert await poller.poll_jobs()
        _calls(bin_dir)
        (bin_dir / "states-extra.json").write_text(
            json.dumps([{"job_id": job_id, "state": ["PENDING"]} for job_id in purged])
        )
        assert await poller.poll_jobs()
        assert len(_fetches(bin_dir)) == 2
        assert await _snapshot_is(writer, json.loads((bin_dir / "squeue.json").read_text()))
    finally:
        await poller.close()
        writer.close()


async def test_a_controller_failing_a_single_fetch_fails_the_poll(fake: FakeSlurm) -> None:
    bin_dir, writer, poller, document = fake.bin_dir, fake.writer, fake.poller, fake.document
    assert await poller.poll_jobs()
    _set_state(document, 8, "COMPLETING")
    _set_state(document, 9, "COMPLETING")
    (bin_dir / "squeue.json").write_text(json.dumps(document))
    (bin_dir / "down").touch()
    assert await poller.poll_jobs() is False
    status = await writer.run(load_source_status, CLUSTER, "slurm")
    assert status.failing and "Unable to contact slurm controller" in (status.error or "")
    running = {job.job_id: job.state for job in (await writer.run(load_snapshot, CLUSTER)).jobs}
    assert running[8] == running[9] == "RUNNING", "the last good snapshot stays"


async def test_every_record_is_read_again_every_so_many_polls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pending reason or start estimate can change without the state: the first poll and
    every FULL_RECORDS_EVERY polls after it read every record, in one plain squeue call."""
    # Every 4 polls rather than 20: the same count, at a sixth of the squeue runs.
    monkeypatch.setattr(job_reads, "FULL_RECORDS_EVERY", 4)
    every = job_reads.FULL_RECORDS_EVERY
    bin_dir = tmp_path / "bin"
    _slurm(bin_dir)
    writer = StoreWriter(tmp_path / "skybot.db")
    config = _config(tmp_path, bin_dir)
    poller = SlurmPoller(config.default_cluster, config, writer)
    full_reads = []
    try:
        for _ in range(every + 2):
            assert await poller.poll_jobs()
            full_reads.append("--all --json" in _calls(bin_dir))
    finally:
        await poller.close()
        writer.close()
    assert full_reads == [True] + [False] * every + [True]


def _with_host_names(jobs: list[Job]) -> list[Job]:
    nodes = parse_sinfo(decode_slurm_json((FIXTURES / "nodes.json").read_bytes())).records
    return with_host_names(jobs, host_names(nodes))


async def _snapshot_is(writer: StoreWriter, document: dict[str, Any]) -> bool:
    """The stored jobs are those a full parse of the squeue document gives (with %N's host
    names, as every poll resolves them from the nodes)."""
    snapshot = await writer.run(load_snapshot, CLUSTER)
    expected = _with_host_names(parse_squeue(decode_slurm_json(json.dumps(document))).records)
    return sorted(snapshot.jobs, key=lambda j: j.job_id) == sorted(expected, key=lambda j: j.job_id)


async def test_a_squeue_without_only_job_state_gets_full_polls(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    _slurm(bin_dir)
    script = bin_dir / "squeue"
    script.write_text(
        SHEBANG + "import sys\n"
        "if '--only-job-state' in sys.argv:\n"
        "    sys.exit(\"squeue: unrecognized option '--only-job-state'\")\n" + SQUEUE
    )
    writer = StoreWriter(tmp_path / "skybot.db")
    config = _config(tmp_path, bin_dir)
    poller = SlurmPoller(config.default_cluster, config, writer)
    try:
        for _ in range(2):
            assert await poller.poll_jobs()
        snapshot = await writer.run(load_snapshot, CLUSTER)
    finally:
        await poller.close()
        writer.close()
    expected = _with_host_names(
        parse_squeue(decode_slurm_json((FIXTURES / "squeue.json").read_bytes())).records
    )
    assert len(snapshot.jobs) == len(expected)
    # Asked once (refused, and not logged as a call), then never again: full reads only,
    # with no listing of pending jobs' settings (every poll reads every record already).
    calls = (bin_dir / "calls.log").read_text().splitlines()
    assert calls == ["--all --json", "--all --json"]
    assert not (bin_dir / "listings.log").exists()


def test_odd_states_listings_are_read_as_the_plain_one_is(tmp_path: Path) -> None:
    """24.11's exact shape is read on a fast path; any other (numeric ids, a job listed
    twice, a stray entry) by the general one, which must ask for the same jobs."""
    plain = [
        {"job_id": "7", "state": ["RUNNING"]},
        {"job_id": "8", "state": ["PENDING"]},
        {"job_id": "9", "state": ["COMPLETED"]},
        {"job_id": "6_1", "state": ["RUNNING"]},
        {"job_id": "6_[2-5]", "state": ["PENDING"]},
    ]
    odd = [{**entry, "job_id": 7} if entry["job_id"] == "7" else entry for entry in plain]
    twice = [*plain, {"job_id": "8", "state": ["PENDING"]}]
    stray = [*plain, "not a job"]
    digester = PollDigester()
    committed = None
    asked = []
    for entries in (plain, odd, twice, stray, plain):
        states = tmp_path / f"states-{len(asked)}.json"
        states.write_text(json.dumps({"jobs": entries, "errors": []}))
        asked.append(digester.changed_jobs(ChangedJobsRequest(states, committed)))
    assert asked == [["6", "7", "8"]] * len(asked)
