"""The poll worker process never loads SQLite or the store (issue 30).

It only formats rows (core/snapshot_rows.py); importing store/ for that cost the child
sqlite3 and sqlite_utils, loaded in every poll worker for nothing. The worker here is the
real one, started by PollWorker from its own start line, after real digests: the start line
gets one statement more, run when its input ends, which writes down what it imported.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.slurm import worker
from scheduler.slurm.wire import ChangedJobsRequest, DigestRequest
from tests.support.recorded_polls import FIXTURES, LIMITS, _fields, _polls, _write

NOT_IN_THE_WORKER = {"sqlite3", "_sqlite3", "sqlite_utils", "store"}


async def test_the_poll_worker_digests_without_sqlite_or_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = tmp_path / "modules.json"
    report = f"; import json; open({str(listed)!r}, 'w').write(json.dumps(sorted(sys.modules)))"
    monkeypatch.setattr(worker, "_CHILD", worker._CHILD + report)
    poll_worker = worker.PollWorker()
    first, second = _polls("v0.0.38")[:2]
    try:
        full = await poll_worker.digest(_write(tmp_path / "first", *first), timeout=60)
        request = _write(tmp_path / "second", *second)
        steady = await poll_worker.digest(
            DigestRequest(**{**_fields(request), "base": full.generation}), timeout=60
        )
        states = tmp_path / "states.json"
        states.write_bytes((FIXTURES / "v0.0.42" / "het_running_states.json").read_bytes())
        changed = await poll_worker.changed_jobs(ChangedJobsRequest(states, None), timeout=60)
    finally:
        await poll_worker.close()
    # The worker did its work: rows formatted, jobs observed, states decoded.
    assert full.changes.full and full.changes.job_rows and full.changes.node_rows
    assert steady.changes.observed and steady.usages[0].lab == LIMITS.labs[0][0]
    assert changed
    modules = set(json.loads(listed.read_text()))
    # What it imported is listed: the digest's own modules are there.
    assert {"scheduler.slurm.digester", "core.snapshot_rows"} <= modules
    assert not {name.split(".")[0] for name in modules} & NOT_IN_THE_WORKER
