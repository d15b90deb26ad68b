"""The poll worker: what it sends back is the same snapshot and transitions as a full poll,
and a worker that dies, hangs or is told to stop never takes the bot with it.

No cluster: the commands' output is the recorded fixtures, written to files as the poller's
commands write theirs.
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.cluster_config import LabConfig
from core.records import LabCap
from core.slurm_decode import decode_slurm_json
from core.slurm_json import parse_sacct, parse_sinfo, parse_squeue
from core.snapshot_rows import JobRow
from core.view import ClusterView
from scheduler.slurm.digester import PollDigester
from scheduler.slurm.packed import packed
from scheduler.slurm.wire import DigestRequest, Generation, LabLimits, PollDigest
from scheduler.slurm.worker import PollWorker, PollWorkerError
from store.caps_and_storage import save_caps
from store.db import open_db
from store.loaded_rows import LoadedRows
from store.slurm_writes import save_slurm_changes
from store.snapshots import load_lab_limits, load_snapshot
from tests.support.factories import CLUSTER
from tests.support.recorded_polls import (
    _fields,
    _load,
    _nodes_document,
    _polls,
    _write,
)
from tests.support.slurm_polls import save_slurm_poll


def _tables(db: Any) -> dict[str, list[Any]]:
    # Not which poll wrote each row (written_in): a full poll rewrites every row.
    return {
        "jobs": db.execute(
            "SELECT job_id, user, account, partition, state, record FROM jobs ORDER BY job_id"
        ).fetchall(),
        "nodes": db.execute("SELECT name, record FROM nodes ORDER BY name").fetchall(),
        "job_states": db.execute(
            "SELECT job_id, state, restarts FROM job_states ORDER BY job_id"
        ).fetchall(),
        "transitions": db.execute(
            "SELECT job_id, user, from_state, to_state, restarts, record FROM job_transitions "
            "ORDER BY id"
        ).fetchall(),
    }


@pytest.mark.parametrize("version", ["v0.0.38", "v0.0.42"])
def test_digested_polls_leave_the_store_as_full_polls_do(tmp_path: Path, version: str) -> None:
    full_db = open_db(tmp_path / "full.db")
    digest_db = open_db(tmp_path / "digest.db")
    digester = PollDigester()
    committed: Generation | None = None
    for number, (squeue, nodes, sacct) in enumerate(_polls(version)):
        at = 1000.0 + 15 * number
        request = _write(tmp_path / "out", squeue, nodes, sacct)
        live = parse_squeue(decode_slurm_json(json.dumps(squeue))).records
        accounted = parse_sacct(decode_slurm_json(json.dumps(sacct))).records if sacct else []
        node_records = parse_sinfo(decode_slurm_json(json.dumps(nodes))).records
        full_transitions = save_slurm_poll(full_db, live, accounted, node_records, at)

        digest = digester.digest(DigestRequest(**{**_fields(request), "base": committed}))
        digest_transitions = save_slurm_changes(digest_db, CLUSTER, digest.changes, at)
        committed = digest.generation

        assert digest_transitions == full_transitions, f"poll {number}"
        assert _tables(digest_db) == _tables(full_db), f"poll {number}"
        if number == 2:
            # Nothing changed since the last poll: nothing to write, however many jobs.
            assert not digest.changes.job_rows and not digest.changes.node_rows
            assert not digest.changes.gone_job_ids and not digest_transitions
            # sacct listed the same ended jobs again: the store was told them last poll.
            assert not digest.changes.observed
    assert digest.jobs == len(live)


def test_a_poll_whose_write_failed_is_diffed_again_from_the_committed_one(
    tmp_path: Path,
) -> None:
    digester = PollDigester()
    first, second, _, _ = _polls("v0.0.38")
    base = digester.digest(_write(tmp_path / "a", *first)).generation
    request = _write(tmp_path / "b", *second)
    uncommitted = digester.digest(DigestRequest(**{**_fields(request), "base": base}))
    again = digester.digest(DigestRequest(**{**_fields(request), "base": base}))
    assert again.changes == uncommitted.changes
    assert again.changes.job_rows and not again.changes.full
    # A base this digester never made (a worker that restarted) means a full replacement.
    unknown = digester.digest(DigestRequest(**{**_fields(request), "base": ("other", 1)}))
    assert unknown.changes.full


def test_sacct_records_already_told_are_not_observed_again(tmp_path: Path) -> None:
    digester = PollDigester()
    squeue, nodes = _load("v0.0.42", "squeue.json"), _nodes_document("v0.0.42")
    sacct = _load("v0.0.42", "sacct.json")

    def digest(folder: str, sacct: Any, base: Generation | None) -> PollDigest:
        request = _write(tmp_path / folder, squeue, nodes, sacct)
        return digester.digest(DigestRequest(**{**_fields(request), "base": base}))

    committed = digest("a", None, None).generation
    told = digest("b", sacct, committed)
    assert told.changes.observed
    # That write failed: the store was told nothing, so the next poll tells it all again.
    retold = digest("c", sacct, committed)
    assert list(retold.changes.observed) == list(told.changes.observed)
    committed = retold.generation
    assert not digest("d", sacct, committed).changes.observed
    # A record sacct now tells differently is observed again, and only that one.
    changed = copy.deepcopy(sacct)
    record = changed["jobs"][0]
    record["name"] = "renamed in accounting"
    observed = digest("e", changed, committed).changes.observed
    assert [job.job_id for job in observed] == [record["job_id"]]


@pytest.mark.parametrize("version", ["v0.0.38", "v0.0.42"])
def test_the_usage_a_poll_counts_is_what_the_bot_would_count(tmp_path: Path, version: str) -> None:
    """Each lab's usage is counted in the worker and stored with the jobs it counts; the
    bot's view reads it, and counts only where nothing stored fits (tests/test_lab_usage.py)."""
    db = open_db(tmp_path / "store.db")
    save_caps(
        db, CLUSTER, [LabCap("kira-lab", 2)], {"kira-lab": ["erin"], "overcap": ["dave"]}, 1.0
    )
    caps, members = load_lab_limits(db, CLUSTER)
    limits = LabLimits(
        (("hoffman-lab", "hoffman-lab"), ("kira-lab", "kira-lab")), caps, members, "overcap"
    )
    labs = tuple(LabConfig(name, name, account) for name, account in limits.labs)
    digester, rows = PollDigester(), LoadedRows()
    committed: Generation | None = None
    waiting = 0
    for number, (squeue, nodes, sacct) in enumerate(_polls(version)):
        request = _write(tmp_path / "out", squeue, nodes, sacct)
        digest = digester.digest(
            DigestRequest(**{**_fields(request), "limits": limits, "base": committed})
        )
        save_slurm_changes(db, CLUSTER, digest.changes, 1000.0 + 15 * number)
        committed = digest.generation
        for snapshot in (load_snapshot(db, CLUSTER, rows), load_snapshot(db, CLUSTER)):
            assert len(snapshot.lab_usages) == len(labs)
            counted_here = replace(snapshot, lab_usages={})
            for lab in labs:
                polled = ClusterView(snapshot, labs).usage(lab)
                assert polled is snapshot.lab_usages[(lab.name, lab.account, "overcap")]
                assert polled == ClusterView(counted_here, labs).usage(lab), f"poll {number}"
                waiting += len(polled.pending_at_cap)
    assert waiting, "the fixtures hold jobs waiting at their lab's cap"


def test_jobs_written_without_a_count_leave_the_bot_to_count(tmp_path: Path) -> None:
    db = open_db(tmp_path / "store.db")
    squeue, nodes, sacct = _polls("v0.0.42")[0]
    digest = PollDigester().digest(_write(tmp_path / "out", squeue, nodes, sacct))
    save_slurm_changes(db, CLUSTER, digest.changes, 1000.0)
    assert load_snapshot(db, CLUSTER).lab_usages
    save_slurm_poll(db, [], [], [], 1015.0)
    assert load_snapshot(db, CLUSTER).lab_usages == {}


async def test_a_dead_worker_fails_that_poll_and_the_next_one_starts_anew(tmp_path: Path) -> None:
    worker = PollWorker()
    request = _write(tmp_path / "out", *_polls("v0.0.38")[0])
    try:
        first = await worker.digest(request, timeout=60)
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGKILL)
        with pytest.raises(PollWorkerError, match="died"):
            await worker.digest(
                DigestRequest(**{**_fields(request), "base": first.generation}), timeout=60
            )
        again = await worker.digest(
            DigestRequest(**{**_fields(request), "base": first.generation}), timeout=60
        )
        # A new process: it never saw that base, so it sends everything.
        assert again.changes.full and again.changes.job_rows
    finally:
        await worker.close()


async def test_a_worker_that_stops_answering_is_killed(tmp_path: Path) -> None:
    worker = PollWorker()
    request = _write(tmp_path / "out", *_polls("v0.0.38")[0])
    try:
        await worker.digest(request, timeout=60)
        stuck = worker.pid
        assert stuck is not None
        os.kill(stuck, signal.SIGSTOP)
        with pytest.raises(PollWorkerError, match="no answer"):
            await worker.digest(request, timeout=0.5)
        assert not Path(f"/proc/{stuck}").exists()  # killed and reaped
        assert (await worker.digest(request, timeout=60)).jobs
    finally:
        await worker.close()


async def test_slurm_errors_in_the_output_come_back_as_slurm_errors(tmp_path: Path) -> None:
    from scheduler.slurm.commands import SlurmCommandError

    worker = PollWorker()
    squeue, nodes, _ = _polls("v0.0.38")[0]
    broken = {**squeue, "errors": [{"description": "Unable to contact slurm controller"}]}
    try:
        with pytest.raises(SlurmCommandError, match="Unable to contact slurm controller"):
            await worker.digest(_write(tmp_path / "out", broken, nodes, None), timeout=60)
    finally:
        await worker.close()


async def test_close_ends_the_worker(tmp_path: Path) -> None:
    worker = PollWorker()
    await worker.digest(_write(tmp_path / "out", *_polls("v0.0.38")[0]), timeout=60)
    pid = worker.pid
    await worker.close()
    assert pid is not None and not Path(f"/proc/{pid}").exists()
    assert worker.pid is None


def test_packed_rows_read_back_as_the_rows_in_band_and_out_of_band() -> None:
    rows = [(i, "alice", "lab", "gpu", "RUNNING", f'{{"job_id": {i}}}') for i in range(4_500)]
    rows_packed = packed(rows, JobRow)
    assert len(rows_packed) == len(rows) and list(rows_packed) == rows
    assert rows_packed[4_499] == rows[-1]
    buffers: list[pickle.PickleBuffer] = []
    message = pickle.dumps(rows_packed, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 3  # chunks of 2,000 rows, not copied into the pickle
    received = [bytearray(buffer.raw()) for buffer in buffers]
    assert list(pickle.loads(message, buffers=received)) == rows
    assert list(copy.deepcopy(rows_packed)) == rows
