"""Benchmark: `/sky gpus` ack latency from the snapshot vs. running squeue per command.

One run, side by side, on this machine:
  * skybot over HTTP: signed slash commands POSTed to the real AsyncApp (process_before_response)
    answering from a 10,000-job snapshot in the store;
  * skybot over Socket Mode: the same app behind AsyncSocketModeHandler, commands pushed by the
    local Slack stand-in, latency measured to the ack's arrival;
  * baseline over HTTP: the same Bolt set-up whose handler runs `squeue --json` on the real test
    cluster for every command (what `watch squeue` users do), then answers; the controller is
    first given 9,000 held jobs, so that it describes a cluster of the snapshot's size.
Latency is p50/p99 per concurrency level (1, 10, 50). Client and server share this process
and its two cores, as in ../shared/reference/bolt-ack-latency.md. Targets (issue 4): p99 <=
25 ms at 50 concurrent, >= 20x faster than the baseline.

    python3 benchmarks/ack_latency.py [--requests 400] [--baseline-requests 30]
                                      [--baseline-jobs 9000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import urlencode

import aiohttp
from msgspec.structs import replace
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.signature import SignatureVerifier

from tests.support.factories import CLUSTER

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.app import build_app, serve_http, web_client  # noqa: E402
from bot.config import (  # noqa: E402
    DatabaseConfig,
    IdentityConfig,
    Secrets,
    SlackConfig,
    load_config,
)
from core.records import Job, LabCap, Node  # noqa: E402
from handlers.identity import IdentityDirectory  # noqa: E402
from handlers.services import Services  # noqa: E402
from store.caps_and_storage import save_caps  # noqa: E402
from store.db import open_db  # noqa: E402
from store.reader import SnapshotCache  # noqa: E402
from store.writer import StoreWriter  # noqa: E402
from tests.support.slack_standin import SlackStandIn  # noqa: E402
from tests.support.slurm_polls import save_slurm_poll  # noqa: E402

SECRET = "benchmark-signing-secret"
TEAM, USER = "T0STANDIN", "UBENCH"
LEVELS = (1, 10, 50)
Send = Callable[[], Awaitable[float]]


def synthetic_snapshot(path: Path, jobs: int) -> None:
    """10,000 jobs over 1,000 nodes and four labs, written as a poll would write them."""
    rng = random.Random(7)
    types = ("a40", "rtx_6000", "2080_ti")
    labs = ("hoffman-lab", "kira-lab", "essa-lab", "hays-lab")
    users = [f"user{i:03d}" for i in range(200)]
    records = []
    for i in range(jobs):
        account = labs[i % len(labs)] if i % 5 else "overcap"
        running = i % 3 != 0
        records.append(
            Job(
                job_id=100_000 + i,
                name=f"train-{i}",
                user=rng.choice(users),
                account=account,
                partition=account,
                state="RUNNING" if running else "PENDING",
                reason="" if running else rng.choice(("Priority", "Resources", "AssocGrpGRES")),
                gpus_by_type={rng.choice(types): rng.choice((1, 2, 4))},
                nodes=f"node{i % 1000:04d}",
                start_time=int(time.time()) - 3600 if running else None,
            )
        )
    nodes = [
        Node(
            name=f"node{i:04d}",
            state="MIXED",
            partitions=(*labs, "overcap"),
            gpus_total={types[i % 3]: 8},
            gpus_used={types[i % 3]: 6},
        )
        for i in range(1000)
    ]
    db = open_db(path)
    save_slurm_poll(db, records, [], nodes, at=time.time())
    save_caps(
        db, CLUSTER, [LabCap(lab, 32) for lab in labs], {"hoffman-lab": {"bench"}}, at=time.time()
    )
    db.close()


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered), p99


async def measure(send: Send, requests: int, concurrency: int) -> tuple[float, float, float]:
    """(p50 ms, p99 ms, requests/s) for `requests` sends, `concurrency` at a time."""
    latencies: list[float] = []
    queue = list(range(requests))

    async def worker() -> None:
        while queue:
            queue.pop()
            latencies.append(await send())

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    p50, p99 = percentiles(latencies)
    return p50 * 1000, p99 * 1000, requests / elapsed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_sender(session: aiohttp.ClientSession, url: str, text: str) -> Send:
    verifier = SignatureVerifier(SECRET)

    async def send() -> float:
        body = urlencode(
            {
                "token": "x",
                "team_id": TEAM,
                "team_domain": "bench",
                "channel_id": "C1",
                "channel_name": "general",
                "user_id": USER,
                "user_name": "bench",
                "command": "/sky",
                "text": text,
                "api_app_id": "A1",
                "response_url": "http://127.0.0.1:1/unused",
                "trigger_id": "1.2.3",
            }
        )
        timestamp = str(int(time.time()))
        headers = {
            "X-Slack-Request-Timestamp": timestamp,
            "X-Slack-Signature": verifier.generate_signature(timestamp=timestamp, body=body),
            "Content-Type": "application/x-www-form-urlencoded",
        }
        started = time.perf_counter()
        async with session.post(url, data=body, headers=headers) as response:
            answer = await response.text()
        elapsed = time.perf_counter() - started
        assert response.status == 200 and answer, (response.status, answer)
        return elapsed

    return send


def socket_sender(slack: SlackStandIn, text: str) -> Send:
    async def send() -> float:
        started = time.perf_counter()
        delivery = await slack.send_slash_command(
            command="/sky", text=text, user_id=USER, team_id=TEAM, timeout=30
        )
        elapsed = time.perf_counter() - started
        assert delivery.payload and delivery.payload.get("text"), delivery.payload
        return elapsed

    return send


def baseline_app(secrets: Secrets) -> AsyncApp:
    """What skybot replaces: every command asks the controller itself."""
    app = AsyncApp(client=web_client(secrets), signing_secret=SECRET, process_before_response=True)

    @app.command("/sky")
    async def sky(ack: AsyncAck) -> None:
        process = await asyncio.create_subprocess_exec(
            "squeue",
            "--all",
            "--json",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        out, _ = await process.communicate()
        jobs = out.count(b'"job_id"')
        await ack(text=f"{jobs} jobs (straight from squeue)")

    return app


async def _load_http(url: str, text: str, requests: int) -> dict[int, tuple[float, float, float]]:
    connector = aiohttp.TCPConnector(limit=100)
    async with aiohttp.ClientSession(connector=connector) as session:
        send = http_sender(session, url, text)
        await measure(send, 20, 5)  # warm-up
        return {level: await measure(send, requests, level) for level in LEVELS}


async def _load_socket_mode(requests: int) -> dict[int, tuple[float, float, float]]:
    """The Slack side of Socket Mode: announce the stand-in, wait for the bot, push commands."""
    async with SlackStandIn() as slack:
        print(
            json.dumps(
                {
                    "api_url": slack.api_url,
                    "app_token": slack.app_token,
                    "bot_token": slack.bot_token,
                }
            ),
            flush=True,
        )
        await slack.wait_for_socket_connection(timeout=30)
        send = socket_sender(slack, "gpus hoffman-lab")
        await measure(send, 20, 5)
        results = {level: await measure(send, requests, level) for level in LEVELS}
        print(json.dumps(results), flush=True)
        # Stay up until the bot has disconnected, so it is not left reconnecting.
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        return results


LOAD_NAME = "skybot-bench-load"


def load_cluster(jobs: int) -> float:
    """Give the real controller `jobs` held jobs, so the baseline's squeue has a real cluster's
    worth of work to describe (as skybot's snapshot does). Returns squeue --json's size in MB."""
    script = (
        f"seq {jobs} | xargs -P 4 -I{{}} sbatch --hold --parsable -p debug -A hoffman-lab "
        f"-J {LOAD_NAME} --output=/dev/null --wrap true > /dev/null"
    )
    subprocess.run(["runuser", "-u", "alice", "--", "sh", "-c", script], check=True, cwd="/tmp")
    out = subprocess.run(["squeue", "--all", "--json"], capture_output=True, check=True).stdout
    return len(out) / 1e6


def unload_cluster() -> None:
    subprocess.run(["scancel", "-n", LOAD_NAME], check=False)


def _spawn(*args: str) -> subprocess.Popen[str]:
    """The load generator runs in its own process, as Slack does: it must not take the
    bot's CPU time inside the bot's process."""
    return subprocess.Popen(
        [sys.executable, __file__, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


async def _results_of(child: subprocess.Popen[str]) -> dict[int, tuple[float, float, float]]:
    line = await asyncio.get_running_loop().run_in_executor(None, child.stdout.readline)  # type: ignore[union-attr]
    return {int(k): tuple(v) for k, v in json.loads(line).items()}  # type: ignore[misc]


async def run(requests: int, baseline_requests: int, baseline_jobs: int) -> int:
    results: dict[str, dict[int, tuple[float, float, float]]] = {}
    squeue_mb = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        db_path = Path(tmp) / "bench.db"
        synthetic_snapshot(db_path, 10_000)
        config = replace(
            load_config(None),
            database=DatabaseConfig(path=str(db_path)),
            identity=IdentityConfig(links={f"{TEAM}/{USER}": "bench"}),
        )
        socket_child = _spawn("--socket-mode", "--requests", str(requests))
        announced = json.loads(socket_child.stdout.readline())  # type: ignore[union-attr]
        secrets = Secrets(
            bot_token=announced["bot_token"],
            app_token=announced["app_token"],
            signing_secret=SECRET,
            api_url=announced["api_url"],
        )
        writer = StoreWriter(db_path)
        cache = SnapshotCache(db_path, config.default_cluster.name, config.labs)
        view = await cache.refresh()
        assert len(view.snapshot.jobs) == 10_000
        identity = IdentityDirectory(config.identity, writer)

        async def no_runner(user: str, request: dict) -> dict:
            return {"ok": False, "error": "not in this benchmark"}

        services = Services(config, identity, no_runner, writer=writer)
        port, baseline_port = _free_port(), _free_port()
        http_app = build_app(
            replace(config, slack=SlackConfig(mode="http")), secrets, cache, services
        )
        runner = await serve_http(http_app, "127.0.0.1", port)
        baseline_runner = await serve_http(baseline_app(secrets), "127.0.0.1", baseline_port)
        handler = AsyncSocketModeHandler(
            build_app(config, secrets, cache, services), secrets.app_token
        )
        try:
            await handler.connect_async()
            results["skybot Socket Mode"] = await _results_of(socket_child)
            await handler.close_async()
            # The stand-in stays up (idle) for the HTTP rows: Bolt's authorize step asks its
            # auth.test once per app.
            child = _spawn(
                "--http", f"http://127.0.0.1:{port}/slack/events", "--requests", str(requests)
            )
            results["skybot HTTP"] = await _results_of(child)
            child.wait(timeout=30)
            # Only now load the controller: its scheduling loops over thousands of jobs would
            # otherwise take CPU from the skybot rows on this two-core machine.
            if baseline_jobs:
                squeue_mb = load_cluster(baseline_jobs)
            child = _spawn(
                "--http",
                f"http://127.0.0.1:{baseline_port}/slack/events",
                "--requests",
                str(baseline_requests),
            )
            results["baseline HTTP"] = await _results_of(child)
            child.wait(timeout=600)
            socket_child.stdin.write("done\n")  # type: ignore[union-attr]
            socket_child.stdin.flush()  # type: ignore[union-attr]
            socket_child.wait(timeout=30)
        finally:
            await runner.cleanup()
            await baseline_runner.cleanup()
            cache.close()
            writer.close()
            if socket_child.poll() is None:
                socket_child.kill()
            unload_cluster()

    order = ("skybot HTTP", "skybot Socket Mode", "baseline HTTP")
    print(
        f"/sky gpus ack latency, 10,000-job snapshot; {requests} requests per skybot row, "
        f"{baseline_requests} per baseline row; load generated from a separate process"
    )
    print(
        f"baseline: squeue --json per command, the test cluster's controller holding "
        f"{baseline_jobs:,} held jobs ({squeue_mb:.1f} MB of JSON per call)"
    )
    header = f"{'':22}" + "".join(f"{'c=' + str(c) + ' p50/p99 ms':>24}" for c in LEVELS)
    print(header + f"{'req/s @c=50':>14}")
    for name in order:
        rows = results[name]
        cells = "".join(f"{rows[c][0]:>12.2f} /{rows[c][1]:>9.2f}" for c in LEVELS)
        print(f"{name:22}{cells}{rows[50][2]:>14.0f}")
    for name in ("skybot HTTP", "skybot Socket Mode"):
        print(
            f"baseline / {name}:  "
            + "   ".join(
                f"c={c}: p50 {results['baseline HTTP'][c][0] / results[name][c][0]:.0f}x, "
                f"p99 {results['baseline HTTP'][c][1] / results[name][c][1]:.0f}x"
                for c in LEVELS
            )
        )
    worst = max(results["skybot HTTP"][50][1], results["skybot Socket Mode"][50][1])
    print(f"worst skybot p99 at c=50: {worst:.1f} ms (target <= 25 ms)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--baseline-requests", type=int, default=30)
    parser.add_argument(
        "--baseline-jobs",
        type=int,
        default=9000,
        help="held jobs to give the real controller for the baseline (clusters here allow 50,000)",
    )
    parser.add_argument("--http", help=argparse.SUPPRESS)
    parser.add_argument("--socket-mode", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.http:
        print(json.dumps(asyncio.run(_load_http(args.http, "gpus hoffman-lab", args.requests))))
        return 0
    if args.socket_mode:
        asyncio.run(_load_socket_mode(args.requests))
        return 0
    return asyncio.run(run(args.requests, args.baseline_requests, args.baseline_jobs))


if __name__ == "__main__":
    sys.exit(main())
