"""Benchmark: from a job's end (Slurm's own end time) to its DM, with the default poll interval.

Runs the real bot in-process with the default configuration (Slurm polled every 15 s) against
the real test cluster (deploy/testcluster.sh up) and the local Slack stand-in, submits jobs
that end at staggered times, and measures, per job, Slurm's end time (sacct) to the moment
the stand-in received the DM. Target (issue 6): <= poll interval + 2 s.

    python3 benchmarks/job_dm_latency.py [--jobs 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from msgspec.structs import replace

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.config import DatabaseConfig, IdentityConfig, Secrets, load_config  # noqa: E402
from bot.service import run_bot  # noqa: E402
from tests.cluster import sbatch  # noqa: E402
from tests.slack_standin import SlackStandIn, SlackUser  # noqa: E402

TEAM = "T0STANDIN"
SLACK_IDS = {"alice": "UALICE", "bob": "UBOB", "carol": "UCAROL", "dave": "UDAVE"}
ACCOUNTS = {"alice": "hoffman-lab", "bob": "hoffman-lab", "carol": "kira-lab", "dave": "kira-lab"}
JOB = re.compile(r"\bJob (\d+)\b")


def slurm_end_times(job_ids: list[int]) -> dict[int, float]:
    out = subprocess.run(
        ["sacct", "--json", "-j", ",".join(map(str, job_ids))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {
        j["job_id"]: float(j["time"]["end"])
        for j in json.loads(out)["jobs"]
        if j["job_id"] in job_ids and j["time"]["end"]
    }


async def run(jobs: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        config = replace(
            load_config(None),
            database=DatabaseConfig(path=f"{tmp}/skybot.db"),
            identity=IdentityConfig(
                links={f"{TEAM}/{sid}": user for user, sid in SLACK_IDS.items()}
            ),
        )
        users = [SlackUser(sid, user) for user, sid in SLACK_IDS.items()]
        async with SlackStandIn(users=users) as slack:
            secrets = Secrets(
                bot_token=slack.bot_token, app_token=slack.app_token, api_url=slack.api_url
            )
            stop = asyncio.Event()
            bot = asyncio.create_task(run_bot(config, secrets, stop))
            await slack.wait_for_socket_connection(timeout=15)
            await asyncio.sleep(3)
            names = list(SLACK_IDS)
            submitted = []
            for i in range(jobs):
                user = names[i % len(names)]
                submitted.append(
                    sbatch(
                        user,
                        "-p",
                        ACCOUNTS[user],
                        "-A",
                        ACCOUNTS[user],
                        "--output=/dev/null",
                        "-J",
                        f"latency-{i}",
                        "--wrap",
                        f"sleep {2 + 3 * i}",
                    )
                )
            seen: dict[int, float] = {}
            deadline = time.time() + 2 * 3 * jobs + 60
            while len(seen) < jobs and time.time() < deadline:
                for call in slack.calls_to("chat.postMessage"):
                    match = JOB.search(str(call.params.get("text")))
                    if call.ok and match and int(match.group(1)) in submitted:
                        seen.setdefault(int(match.group(1)), time.time())
                await asyncio.sleep(0.1)
            stop.set()
            await asyncio.wait_for(bot, timeout=30)
    ends = slurm_end_times(submitted)
    latencies = sorted(seen[j] - ends[j] for j in submitted if j in seen and j in ends)
    poll = config.slurm.poll_seconds
    print(
        f"job end -> DM, poll interval {poll:g} s, {len(latencies)} of {jobs} jobs "
        f"(first end {datetime.fromtimestamp(min(ends.values())):%H:%M:%S})"
    )
    print(
        f"  min {latencies[0]:.1f} s  median {statistics.median(latencies):.1f} s  "
        f"max {latencies[-1]:.1f} s  (target <= {poll + 2:g} s; Slurm's end time has 1 s "
        "resolution)"
    )
    return 0 if len(latencies) == jobs else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=16)
    return asyncio.run(run(parser.parse_args().jobs))


if __name__ == "__main__":
    sys.exit(main())
