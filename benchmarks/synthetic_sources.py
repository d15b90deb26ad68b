"""A synthetic 24.11 cluster served both ways skybot reads one: Slurm's commands and slurmrestd.

For benchmarks/poll_ack_latency.py --sources. Every document is cloned from the recorded
fixtures (tests/fixtures/slurm/v0.0.42: `squeue --json`'s plain jobs, and the nodes, sacct
and sacctmgr documents; benchmarks/parse_and_store.py's generator), in two turns: turn 1
has `changed` of the jobs in the other state (PENDING <-> RUNNING). The turn flips every
`flip_seconds` (the poll interval), on the clock, so that both sources, probed every second
and polled every few, see the same queue change as often.

The commands (`bin_dir`) are 24.11's with default settings: `squeue --only-job-state`, the
pending-settings listing (scheduler/slurm/pending_changes.py) and the priorities listing as
realistic text, one line per pending job, `--jobs=ID,…` the records asked for.
slurmrestd (`serve`, its own process: `python3 synthetic_sources.py DIR PORT`) answers on
127.0.0.1 with the shape of 24.11's data_parser v0.0.42: `jobs/` (stamped `last_update`),
`jobs/state/`, `job/{id}/` (HTTP 404 "Invalid job id specified" for an unknown id), `nodes/`,
`partitions/`, `reservations/`, `ping/`, `diag/`, and slurmdb's `jobs/`, `qos/`,
`associations/` and `user/{name}/`.
"""

from __future__ import annotations

import copy
import json
import random
import shlex
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from parse_and_store import FIXTURES, USERS, synthetic_documents  # noqa: E402

from scheduler.slurm.pending_changes import _FIELDS  # noqa: E402

VERSION = "v0.0.42"
RESTD = FIXTURES / "restd" / VERSION
LIMITS = shlex.quote(str(FIXTURES / "limits"))


def turn_now(flip_seconds: float) -> int:
    return int(time.time() / flip_seconds) % 2


def _number(value: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": value}


def write_cluster(folder: Path, jobs: int, nodes: int, changed: float) -> dict[str, float]:
    """Every file both sources serve, in `folder`; sizes in MB."""
    folder.mkdir(parents=True, exist_ok=True)
    documents = synthetic_documents(VERSION, 0, nodes)
    for name in ("sinfo", "sacct"):
        (folder / f"{name}.json").write_text(documents[name])
    fixture = json.loads((FIXTURES / VERSION / "squeue.json").read_text())
    templates = [job for job in fixture["jobs"] if job["array_job_id"]["number"] == 0]
    head = {key: value for key, value in fixture.items() if key != "jobs"}
    records = []
    for i in range(jobs):
        record = copy.deepcopy(templates[i % len(templates)])
        record["job_id"] = 100_000 + i
        record["user_name"] = USERS[i % len(USERS)]
        records.append(record)
    rng = random.Random(17)
    flipped = set(rng.sample(range(jobs), int(jobs * changed)))
    sizes = {}
    for turn in (0, 1):
        texts, states, pending = [], [], []
        for i, record in enumerate(records):
            if turn and i in flipped:
                record = {**record}
                running = "RUNNING" in record["job_state"]
                record["job_state"] = ["PENDING" if running else "RUNNING"]
            texts.append(json.dumps(record))
            states.append({"job_id": str(record["job_id"]), "state": record["job_state"]})
            if record["job_state"] == ["PENDING"]:
                pending.append(record)
        _write_jobs(folder, turn, texts, head)
        states_document = {"jobs": states, **{k: head[k] for k in ("meta", "errors", "warnings")}}
        (folder / f"states-{turn}.json").write_text(json.dumps(states_document))
        (folder / f"pending-{turn}.txt").write_text("".join(map(_pending_line, pending)))
        (folder / f"priorities-{turn}.txt").write_text(
            "".join(f"{job['job_id']}|{1000 + job['job_id'] % 97}\n" for job in pending)
        )
        sizes[f"jobs {turn}"] = (folder / f"squeue-{turn}.json").stat().st_size / 1e6
    sizes["states"] = (folder / "states-0.json").stat().st_size / 1e6
    sizes["pending listing"] = (folder / "pending-0.txt").stat().st_size / 1e6
    return sizes


def _write_jobs(folder: Path, turn: int, texts: list[str], head: dict[str, Any]) -> None:
    """The whole document, and each record's (offset, length) in it for `--jobs=`/`job/{id}`."""
    opening = b'{"jobs": ['
    index: dict[str, tuple[int, int]] = {}
    with (folder / f"squeue-{turn}.json").open("wb") as out:
        out.write(opening)
        at = len(opening)
        for number, text in enumerate(texts):
            data = text.encode()
            if number:
                out.write(b",")
                at += 1
            out.write(data)
            index[str(json.loads(text)["job_id"])] = (at, len(data))
            at += len(data)
        rest = {**head, "last_update": _number(int(time.time()))}
        out.write(b"], " + json.dumps(rest).encode()[1:])
    (folder / f"index-{turn}.json").write_text(json.dumps(index))


def _pending_line(job: dict[str, Any]) -> str:
    """One line of PENDING_LISTING's text as 24.11's squeue prints it: each field, then "|"."""
    values = {
        "JobID": job["job_id"],
        "ArrayTaskId": "N/A",
        "Partition": job["partition"],
        "Account": job["account"],
        "QOS": job["qos"],
        "TimeLimit": "1-00:00:00",
        "tres-per-job": "N/A",
        "tres-per-node": job.get("tres_per_node") or "N/A",
        "tres-per-task": "N/A",
        "tres-per-socket": "N/A",
        "NumNodes": "1",
        "NumTasks": "1",
        "Reason": job["state_reason"],
        "UserName": job["user_name"],
        "StdOut": job["standard_output"],
        "StdErr": job["standard_error"],
        "WorkDir": job["current_working_directory"],
        "Comment": job.get("comment") or "",
        "Name": job["name"],
    }
    return "".join(f"{values[name]}|" for name in _FIELDS) + "\n"


def records_of(
    folder: Path, turn: int, ids: list[str], index: dict[str, tuple[int, int]] | None = None
) -> bytes:
    """A jobs document of the records of `ids` it holds, as `squeue --jobs=` prints one
    (`index`: the turn's, read once by the caller)."""
    if index is None:
        index = json.loads((folder / f"index-{turn}.json").read_text())
    parts = []
    with (folder / f"squeue-{turn}.json").open("rb") as whole:
        for job_id in ids:
            if job_id in index:
                whole.seek(index[job_id][0])
                parts.append(whole.read(index[job_id][1]))
    return b'{"jobs": [' + b",".join(parts) + b'], "errors": [], "warnings": []}'


def write_commands(folder: Path, bin_dir: Path, flip_seconds: float) -> None:
    """24.11's commands, printing the cluster's turn of the moment."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    here = shlex.quote(str(folder))
    turn = f"$(( $(date +%s) / {int(flip_seconds)} % 2 ))"
    by_id = (
        f"exec {shlex.quote(sys.executable)} {shlex.quote(__file__)} --records {here} "
        f'"$turn" "${{jobs#--jobs=}}"'
    )
    _program(
        bin_dir,
        "squeue",
        f"turn={turn}\njobs=''\n"
        'for arg in "$@"; do case "$arg" in --jobs=*) jobs="$arg";; esac; done\n'
        'case "$*" in\n'
        f'  *--only-job-state*) exec cat {here}/states-"$turn".json;;\n'
        f'  *--Format=*) exec cat {here}/pending-"$turn".txt;;\n'
        f'  *--format=*) exec cat {here}/priorities-"$turn".txt;;\n'
        "esac\n"
        f'if [ -n "$jobs" ]; then {by_id}; fi\n'
        f'exec cat {here}/squeue-"$turn".json',
    )
    _program(
        bin_dir,
        "scontrol",
        'case "$*" in\n'
        f"  *nodes*) exec cat {here}/sinfo.json;;\n"
        f"  *partition*) exec cat {LIMITS}/scontrol_partitions_24.11.json;;\n"
        f"  *reservation*) exec cat {LIMITS}/scontrol_reservations_24.11.json;;\n"
        "esac\n"
        'echo "Slurmctld(primary) at bench is UP"',
    )
    _program(bin_dir, "sinfo", f"exec cat {here}/sinfo.json")
    _program(bin_dir, "sacct", f"exec cat {here}/sacct.json")
    associations = shlex.quote(str(FIXTURES / VERSION / "sacctmgr_assoc.json"))
    _program(
        bin_dir,
        "sacctmgr",
        f'case "$*" in *qos*) exec cat {LIMITS}/sacctmgr_qos_24.11.json;; esac\n'
        f"exec cat {associations}",
    )
    _program(bin_dir, "sdiag", 'echo "DBD Agent queue size: 0"')
    no_sprio = "sprio: error: not running a supported priority plugin"
    _program(bin_dir, "sprio", f'echo "{no_sprio}" >&2; exit 1')


def _program(bin_dir: Path, command: str, body: str) -> None:
    script = bin_dir / command
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)


def serve(folder: Path, port: int, flip_seconds: float) -> None:
    """slurmrestd's answers for the cluster in `folder`, on 127.0.0.1:`port`, until killed."""
    from aiohttp import web

    recorded = {
        name: (RESTD / f"{name}.json").read_bytes() for name in ("partitions", "slurmdb_jobs")
    }
    meta = json.loads((RESTD / "job_states.json").read_text())["meta"]
    indexes = [json.loads((folder / f"index-{turn}.json").read_text()) for turn in (0, 1)]

    def json_answer(document: dict[str, Any], status: int = 200) -> web.Response:
        body = json.dumps({**document, "meta": meta, "errors": [], "warnings": []})
        return web.Response(body=body, status=status, content_type="application/json")

    async def handle(request: web.Request) -> web.StreamResponse:
        parts = request.path.strip("/").split("/")
        api, what = parts[0], "/".join(parts[2:])
        turn = turn_now(flip_seconds)
        if api == "slurmdb":
            if what == "jobs":
                return web.FileResponse(folder / "sacct.json")
            if what.startswith("user/"):
                return json_answer({"users": [{"name": what.split("/")[1]}]})
            if what == "associations":
                return web.FileResponse(FIXTURES / VERSION / "sacctmgr_assoc.json")
            return json_answer({"qos": []})
        if what == "ping":
            return json_answer({"pings": [{"hostname": "bench", "pinged": "UP"}]})
        if what == "diag":
            return json_answer(
                {"statistics": {"dbd_agent_queue_size": 0, "rpcs_by_user": [{"user": "skybot"}]}}
            )
        if what == "jobs":
            return web.FileResponse(folder / f"squeue-{turn}.json")
        if what == "jobs/state":
            return web.FileResponse(folder / f"states-{turn}.json")
        if what.startswith("job/"):
            body = records_of(folder, turn, [parts[3]], indexes[turn])
            if body.startswith(b'{"jobs": []'):
                error = {"error_number": 2017, "error": "Invalid job id specified"}
                return web.json_response({"jobs": [], "errors": [error]}, status=404)
            return web.Response(body=body, content_type="application/json")
        if what == "nodes":
            return web.FileResponse(folder / "sinfo.json")
        if what == "partitions":
            return web.Response(body=recorded["partitions"], content_type="application/json")
        if what == "reservations":
            return json_answer({"reservations": []})
        return web.Response(status=404)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


if __name__ == "__main__":
    if sys.argv[1] == "--records":
        _, _, folder, turn, ids = sys.argv
        sys.stdout.buffer.write(records_of(Path(folder), int(turn), ids.split(",")))
    else:
        serve(Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
