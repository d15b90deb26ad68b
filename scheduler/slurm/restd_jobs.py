"""slurmrestd's job reads as bytes and files, never decoded on the bot's event loop.

At 100,000 jobs a whole `jobs` answer is 600 MB: read into memory it doubled the bot's
RSS, and its shape check held the loop for a second. So on 24.x a poll reads what the CLI
path reads with `squeue --only-job-state` and `squeue --jobs=ID`: `jobs/state` (every job's
id and state, about 60 bytes a job, checked for shape here) and `job/{id}` for the jobs
whose state changed; a whole `jobs` read now and then is streamed into a file as it arrives
and decoded by the poll worker (scheduler/slurm/worker.py), as the commands' output is.

22.05 (v0.0.38) and 23.02 (v0.0.39) have no `jobs/state`: they read the whole queue with
update_time (`changed_jobs`), which a quiet cluster answers for almost nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from scheduler.slurm import restd_answer
from scheduler.slurm.restd import LEGACY_VERSION, RestdClient

# An update_time this far behind the client's clock: the controller's clock may be behind
# ours by that much, and a second too early only costs one full read.
_CLOCK_MARGIN = 1
# The versions without jobs/state (Slurm 24.05+; 23.11's v0.0.40 has it too).
_NO_STATES = (LEGACY_VERSION, "v0.0.39")


@dataclass(frozen=True)
class RawRead:
    # The jobs answer's bytes (well-formed: restd_answer.shape); None: nothing changed.
    body: bytes | None
    update_time: int


async def reads_states(client: RestdClient) -> bool:
    """Whether this slurmrestd serves jobs/state (and job/{id})."""
    return await client.version() not in _NO_STATES


def _all_jobs(version: str) -> dict[str, object]:
    # flags=ALL: hidden partitions' jobs too, as `squeue --all`; 22.05 takes no flags.
    return {} if version == LEGACY_VERSION else {"flags": "ALL"}


async def changed_jobs(client: RestdClient, update_time: int | None) -> RawRead:
    """The whole queue's answer, checked for shape without being decoded; None if nothing
    changed since `update_time` (22.05: HTTP 304; 24.x: `"jobs": []` stamped 0)."""
    params = _all_jobs(await client.version())
    asked_at = int(client.clock()) - _CLOCK_MARGIN
    if update_time is not None:
        params["update_time"] = update_time
    body = await client.body("jobs", params, unchanged_ok=update_time is not None)
    if body is None:  # HTTP 304: 22.05
        assert update_time is not None
        return RawRead(None, update_time)
    count, last_update = restd_answer.shape(client.where, "jobs", body)
    if update_time is not None and last_update == 0 and count == 0:
        return RawRead(None, update_time)  # 24.x's "no change"
    return RawRead(body, last_update or asked_at)


async def whole_jobs_into(client: RestdClient, path: Path) -> None:
    """Every job's record, streamed into `path` unread: the poll worker decodes it, and
    names an answer that is not Slurm's JSON as slurmrestd's (digester.py)."""
    params = _all_jobs(await client.version())
    await client.body("jobs", params, sink=path)


async def job_states(client: RestdClient) -> bytes:
    """jobs/state's answer (`squeue --only-job-state --json`'s document), checked for shape."""
    body = await client.body("jobs/state", {})
    assert body is not None
    restd_answer.shape(client.where, "jobs/state", body)
    return body


async def job_into(client: RestdClient, path: Path, job_id: str) -> bool:
    """One job's records (an array's: every task's) into `path`; False if slurmctld no
    longer holds it (HTTP 404, "Invalid job id specified")."""
    body = await client.body(f"job/{quote(job_id, safe='')}", {}, gone_ok=True)
    if body is None:
        return False
    restd_answer.shape(client.where, f"job/{job_id}", body)
    await asyncio.to_thread(path.write_bytes, body)
    return True
