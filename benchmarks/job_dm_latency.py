"""Benchmark: from a job's end to its DM, and what polling costs slurmctld, on each source.

Runs the real bot in-process with the default configuration (a full poll every 15 s, the
change probe every second where the source has a cheap one) against a real test cluster and
the local Slack stand-in, once per source: the cluster's commands and its slurmrestd. Per
source: a quiet window (nothing submitted, 20 s), then jobs that end at staggered times. A
job's end is the moment its script finished (it stamps the time itself: Slurm's end time
has whole seconds); its DM is the moment the stand-in received it (checked every 50 ms).
slurmctld's time is sdiag's total_time of the read RPCs a poll makes (job, state, node,
partition, federation, stats, ping), reset before each window: per minute and as a share.

On the host (22.05) it also runs itself inside the 24.11 sandbox, and prints one table:

    flock -o /tmp/skybot-cluster.lock flock -o /tmp/skybot-cluster-24.11.lock \
        python3 benchmarks/job_dm_latency.py [--jobs 12] [--no-2411]

At scale (issue 39), inside the 24.11 sandbox only: --held queues that many held jobs first
(benchmarks/controller_cost.py's, cancelled at the end, also on failure), the quiet window
lasts --quiet-seconds (the slurmrestd source's --restd-quiet-seconds), and slurmrestd's
resident memory is sampled every 10 s through each source's windows. Targets: each ending
job DM'd once, p50 <= 2 s, slurmctld's share below 1% (quiet and while jobs end), and
slurmrestd's memory flat (its last sample within 5% of its first); exits 1 when missed.

    flock -o /tmp/skybot-cluster-24.11.lock deploy/testcluster-24.11.sh run python \
        benchmarks/job_dm_latency.py --held 20000 --jobs 10 --quiet-seconds 60 \
        --restd-quiet-seconds 600
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from msgspec.structs import replace

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.config import (  # noqa: E402
    DatabaseConfig,
    IdentityConfig,
    MetricsConfig,
    Secrets,
    load_config,
)
from bot.service import run_bot  # noqa: E402
from tests.support.bot_process import free_port  # noqa: E402
from tests.support.cluster import sbatch  # noqa: E402
from tests.support.slack_standin import SlackStandIn, SlackUser  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
import controller_cost  # noqa: E402

TEAM = "T0STANDIN"
SLACK_IDS = {"alice": "UALICE", "bob": "UBOB", "carol": "UCAROL", "dave": "UDAVE"}
ACCOUNTS = {"alice": "hoffman-lab", "bob": "hoffman-lab", "carol": "kira-lab", "dave": "kira-lab"}
JOB = re.compile(r"\bJob (\d+)\b")
INSIDE_2411 = Path("/etc/skybot-testcluster-24.11").exists()
VERSION = "24.11" if INSIDE_2411 else "22.05"
RESTD_URL = (
    "unix:/run/skybot-slurmrestd/24.11/slurmrestd.sock" if INSIDE_2411 else "http://127.0.0.1:6820"
)
TOKEN = f"/etc/skybot/slurm-{VERSION}.jwt"
QUIET_SECONDS = 20.0
RSS_EVERY_SECONDS = 10.0
# The RPCs skybot's reads make of slurmctld (sacct and sacctmgr go to slurmdbd). sbatch's
# federation lookup is counted too: a little more than skybot's own, never less.
READ_RPC = re.compile(
    r"^\s*(REQUEST_(?:JOB_INFO\w*|JOB_STATE|NODE_INFO\w*|PARTITION_INFO|FED_INFO|STATS_INFO|PING"
    r"|JOB_USER_INFO|BUILD_INFO))\s.*?total_time:\s*(\d+)",
    re.M,
)


def sdiag_reset() -> None:
    subprocess.run(["sdiag", "--reset"], check=True, capture_output=True)


def sdiag_read_microseconds() -> int:
    out = subprocess.run(["sdiag"], check=True, capture_output=True, text=True).stdout
    return sum(int(total) for _, total in READ_RPC.findall(out))


async def scrape(port: int) -> dict[str, float]:
    """The bot's Slurm poll interval and poll counts, from its /metrics."""
    url = f"http://127.0.0.1:{port}/metrics"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        text = await response.text()
    wanted = {
        ("skybot_poll_interval_seconds", "slurm"): "interval",
        ("skybot_poll_duration_seconds_count", "slurm"): "polls",
        ("skybot_poll_duration_seconds_count", "slurm-probe"): "probes",
    }
    found = {}
    # Labelled by cluster and source since several clusters: `name{cluster="…",source="…"}`.
    for name, source, value in re.findall(r'^(\w+){[^}]*source="([^"]+)"[^}]*} (\S+)$', text, re.M):
        if (name, source) in wanted:
            found[wanted[name, source]] = float(value)
    return found


def slurmrestd_rss_mb() -> float | None:
    """slurmrestd's resident memory now (this namespace's only one), in MB; None if none
    runs here."""
    for comm in Path("/proc").glob("[0-9]*/comm"):
        with contextlib.suppress(OSError):
            if comm.read_text().strip() == "slurmrestd":
                status = (comm.parent / "status").read_text()
                match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
                return int(match.group(1)) / 1024 if match else None
    return None


async def sample_rss(samples: list[float]) -> None:
    """slurmrestd's RSS every RSS_EVERY_SECONDS into `samples`, until cancelled."""
    while True:
        rss = slurmrestd_rss_mb()
        if rss is not None:
            samples.append(rss)
        await asyncio.sleep(RSS_EVERY_SECONDS)


def bot_config(source: str, tmp: str, metrics_port: int) -> Any:
    base = load_config(None)
    cluster = base.default_cluster
    if source == "slurmrestd":
        cluster = replace(cluster, source="slurmrestd", url=RESTD_URL, token_file=TOKEN)
    return replace(
        base,
        database=DatabaseConfig(path=f"{tmp}/skybot.db"),
        identity=IdentityConfig(links={f"{TEAM}/{sid}": user for user, sid in SLACK_IDS.items()}),
        metrics=MetricsConfig(port=metrics_port),
        clusters=(cluster,),
    )


def submit(jobs: int, stamps: Path) -> list[int]:
    names = list(SLACK_IDS)
    submitted = []
    for i in range(jobs):
        user = names[i % len(names)]
        script = f"sleep {2 + 1.5 * i:g}; date +%s.%N > {stamps}/$SLURM_JOB_ID"
        account = ACCOUNTS[user]
        submitted.append(
            sbatch(user, "-p", account, "-A", account, "--output=/dev/null", "--wrap", script)
        )
    return submitted


async def measure(source: str, jobs: int, quiet_seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        stamps = Path(tmp) / "ends"
        stamps.mkdir()
        os.chmod(tmp, 0o711)  # the jobs run as the test users
        os.chmod(stamps, 0o1777)
        port = free_port()
        config = bot_config(source, tmp, port)
        users = [SlackUser(sid, user) for user, sid in SLACK_IDS.items()]
        async with SlackStandIn(users=users) as slack:
            secrets = Secrets(
                bot_token=slack.bot_token, app_token=slack.app_token, api_url=slack.api_url
            )
            stop = asyncio.Event()
            bot_from = time.monotonic()
            bot = asyncio.create_task(run_bot(config, secrets, stop))
            await slack.wait_for_socket_connection(timeout=15)
            await asyncio.sleep(5)  # the first poll, and the poll worker's start
            rss: list[float] = []
            sampler = asyncio.create_task(sample_rss(rss))
            sdiag_reset()
            await asyncio.sleep(quiet_seconds)
            quiet_us = sdiag_read_microseconds()
            sdiag_reset()
            busy_from = time.monotonic()
            submitted = await asyncio.to_thread(submit, jobs, stamps)
            seen: dict[int, float] = {}
            deadline = time.time() + 1.5 * jobs + 60
            while len(seen) < jobs and time.time() < deadline:
                for call in slack.calls_to("chat.postMessage"):
                    match = JOB.search(str(call.params.get("text")))
                    if call.ok and match and int(match.group(1)) in submitted:
                        seen.setdefault(int(match.group(1)), time.time())
                await asyncio.sleep(0.05)
            busy_us = sdiag_read_microseconds()
            busy_seconds = time.monotonic() - busy_from
            await asyncio.sleep(10)  # a second DM for a job would come within a poll or two
            sampler.cancel()
            dms = collections.Counter(
                int(match.group(1))
                for call in slack.calls_to("chat.postMessage")
                if call.ok and (match := JOB.search(str(call.params.get("text"))))
            )
            polling = await scrape(port)
            bot_seconds = time.monotonic() - bot_from
            stop.set()
            await asyncio.wait_for(bot, timeout=30)
        ends = {int(p.name): float(p.read_text()) for p in stamps.iterdir() if p.read_text()}
    latencies = sorted(seen[j] - ends[j] for j in submitted if j in seen and j in ends)
    return {
        "cluster": VERSION,
        "source": source,
        "jobs": jobs,
        "told": len(latencies),
        "p50": statistics.median(latencies) if latencies else None,
        "p99": latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
        if latencies
        else None,
        "dmd_once": sum(dms[j] == 1 for j in submitted),
        "quiet_ms_per_min": quiet_us / 1000 * 60 / quiet_seconds,
        "restd_rss_mb": rss,
        "busy_ms_per_min": busy_us / 1000 * 60 / busy_seconds,
        "busy_seconds": busy_seconds,
        "bot_seconds": bot_seconds,
        **polling,
    }


def sandbox_rows(jobs: int) -> list[dict[str, Any]]:
    """The same benchmark inside the 24.11 sandbox (its commands exist only there)."""
    out = subprocess.run(
        [
            str(REPO / "deploy/testcluster-24.11.sh"),
            "run",
            "python",
            str(REPO / "benchmarks/job_dm_latency.py"),
            "--jobs",
            str(jobs),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows: list[dict[str, Any]] = json.loads(out.strip().splitlines()[-1])
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f} s"

    lines = [
        "| Slurm | source | full poll every | probe | told | job end → DM p50 | p99 "
        "| slurmctld quiet, ms/min (share) | slurmctld while jobs end, ms/min (share) "
        "| DM'd once | slurmrestd RSS first / max / last |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        quiet, busy = row["quiet_ms_per_min"], row["busy_ms_per_min"]
        lines.append(
            f"| {row['cluster']} | {row['source']} | {row.get('interval', 0):g} s "
            f"| {int(row.get('probes', 0))} in {row['bot_seconds']:.0f} s "
            f"| {row['told']}/{row['jobs']} | {seconds(row['p50'])} | {seconds(row['p99'])} "
            f"| {quiet:.2f} ({quiet / 600:.4f}%) | {busy:.2f} ({busy / 600:.4f}%) "
            f"| {row.get('dmd_once', '-')}/{row['jobs']} | {_rss_text(row.get('restd_rss_mb'))} |"
        )
    return "\n".join(lines)


def _rss_text(samples: list[float] | None) -> str:
    if not samples:
        return "-"
    return f"{samples[0]:.1f} / {max(samples):.1f} / {samples[-1]:.1f} MB ({len(samples)} samples)"


def missed_targets(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 39's targets, for the slurmrestd rows (the CLI's are there to compare with)."""
    missed = []
    for row in rows:
        name = f"{row['cluster']} {row['source']}"
        if row.get("dmd_once", row["jobs"]) != row["jobs"]:
            missed.append(f"{name}: {row['dmd_once']}/{row['jobs']} jobs DM'd exactly once")
        if row["source"] != "slurmrestd":
            continue
        if row["p50"] is None or row["p50"] > 2.0:
            missed.append(f"{name}: job end -> DM p50 {row['p50']} s (target <= 2 s)")
        for window in ("quiet", "busy"):
            share = row[f"{window}_ms_per_min"] / 600
            if share >= 1.0:
                missed.append(f"{name}: slurmctld's share {window} {share:.2f}% (target < 1%)")
        rss = row.get("restd_rss_mb") or []
        if not rss:
            missed.append(f"{name}: slurmrestd's memory not sampled (not running here?)")
        elif rss[-1] > 1.05 * rss[0]:
            missed.append(f"{name}: slurmrestd's RSS grew {rss[0]:.1f} -> {rss[-1]:.1f} MB")
    return missed


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for source in args.sources.split(","):
        quiet = args.restd_quiet_seconds if source == "slurmrestd" else args.quiet_seconds
        rows.append(await measure(source, args.jobs, quiet or args.quiet_seconds))
    return rows


def with_held_jobs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The rows, measured with `args.held` held jobs in the queue (cancelled after)."""
    if not args.held:
        return asyncio.run(run(args))
    if not INSIDE_2411:
        raise SystemExit("--held runs inside the 24.11 sandbox (deploy/testcluster-24.11.sh run)")
    try:
        took = controller_cost.submit(args.held)
        held = len(controller_cost.held_job_ids())
        print(f"{held:,} held jobs queued in {took:.0f} s", file=sys.stderr, flush=True)
        return asyncio.run(run(args))
    finally:
        controller_cost.cancel_all()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=12)
    parser.add_argument("--sources", default="cli,slurmrestd")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--no-2411", action="store_true", help="skip the 24.11 sandbox")
    parser.add_argument("--held", type=int, default=0, help="held jobs queued first (24.11)")
    parser.add_argument("--quiet-seconds", type=float, default=QUIET_SECONDS)
    parser.add_argument(
        "--restd-quiet-seconds", type=float, default=0.0, help="the slurmrestd source's, if other"
    )
    args = parser.parse_args()
    rows = with_held_jobs(args)
    if args.json:
        print(json.dumps(rows))
        return 0
    if not INSIDE_2411 and not args.no_2411:
        rows += sandbox_rows(args.jobs)
    print(table(rows))
    missed = missed_targets(rows) if args.held else []
    for miss in missed:
        print(f"MISSED: {miss}")
    return 0 if all(row["told"] == row["jobs"] for row in rows) and not missed else 1


if __name__ == "__main__":
    sys.exit(main())
