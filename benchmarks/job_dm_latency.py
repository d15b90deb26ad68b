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
"""

from __future__ import annotations

import argparse
import asyncio
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
        'skybot_poll_interval_seconds{source="slurm"}': "interval",
        'skybot_poll_duration_seconds_count{source="slurm"}': "polls",
        'skybot_poll_duration_seconds_count{source="slurm-probe"}': "probes",
    }
    found = {}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name in wanted:
            found[wanted[name]] = float(value)
    return found


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


async def measure(source: str, jobs: int) -> dict[str, Any]:
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
            sdiag_reset()
            await asyncio.sleep(QUIET_SECONDS)
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
        "quiet_ms_per_min": quiet_us / 1000 * 60 / QUIET_SECONDS,
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
        "| slurmctld quiet, ms/min (share) | slurmctld while jobs end, ms/min (share) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        quiet, busy = row["quiet_ms_per_min"], row["busy_ms_per_min"]
        lines.append(
            f"| {row['cluster']} | {row['source']} | {row.get('interval', 0):g} s "
            f"| {int(row.get('probes', 0))} in {row['bot_seconds']:.0f} s "
            f"| {row['told']}/{row['jobs']} | {seconds(row['p50'])} | {seconds(row['p99'])} "
            f"| {quiet:.2f} ({quiet / 600:.4f}%) | {busy:.2f} ({busy / 600:.4f}%) |"
        )
    return "\n".join(lines)


async def run(sources: list[str], jobs: int) -> list[dict[str, Any]]:
    return [await measure(source, jobs) for source in sources]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=12)
    parser.add_argument("--sources", default="cli,slurmrestd")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--no-2411", action="store_true", help="skip the 24.11 sandbox")
    args = parser.parse_args()
    rows = asyncio.run(run(args.sources.split(","), args.jobs))
    if args.json:
        print(json.dumps(rows))
        return 0
    if not INSIDE_2411 and not args.no_2411:
        rows += sandbox_rows(args.jobs)
    print(table(rows))
    return 0 if all(row["told"] == row["jobs"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
