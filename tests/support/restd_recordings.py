"""slurmrestd's recorded answers (tests/fixtures/slurm/restd/, by its record.sh from the real 22.05
and 24.11 daemons), served back by the name of the request they answer."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "restd"


def recorded(version: str, name: str) -> web.Response:
    base = FIXTURES / version / name
    status_file = base.with_suffix(".status")
    status = int(status_file.read_text()) if status_file.exists() else 200
    for suffix, kind in ((".json", "application/json"), (".txt", "text/plain")):
        if base.with_suffix(suffix).exists():
            body = base.with_suffix(suffix).read_bytes()
            return web.Response(status=status, body=body, content_type=kind)
    return web.Response(status=status)


def fixture_name(path: str, query: str) -> str | None:
    what = path.rstrip("/").split("/", 3)[3] if path.count("/") >= 3 else ""
    if path.startswith("/slurmdb/"):
        return "slurmdb_jobs"
    if what in ("jobs", "nodes"):
        return f"{what}_unchanged" if "update_time" in query else what
    return {"jobs/state": "job_states", "partitions": "partitions"}.get(what)
