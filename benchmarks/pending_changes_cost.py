"""Benchmark: what seeing pending jobs' changes within `[slurm] pending_changes_seconds` costs.

On the cluster this runs on (meant for the 24.11 sandbox, where polls read only job states;
on 22.05 every poll is a full read and this has nothing to add), with --jobs held jobs
queued as benchmarks/controller_cost.py queues them, skybot's own poller polls, per poll:
slurmctld's read RPCs (sdiag, reset before each poll), wall time, each command's wall time,
and how many of the pending jobs changed by `scontrol update` (partition, as root) just
before that poll the snapshot shows changed after it. Side by side:

  * before: states-only polls with no listing of pending jobs' settings (the bound set so
    long that the listing runs on the first poll only): a change waits for the full read
    every FULL_RECORDS_EVERY polls;
  * after: the listing on every poll, as the defaults (15 s polls, 30 s bound) run it;

then each way of learning pending jobs' settings alone: the text listing skybot uses, the
JSON of pending jobs only (`--states=PENDING`), the full JSON read, and the states listing.

    flock -o /tmp/skybot-cluster-24.11.lock deploy/testcluster-24.11.sh run \\
        python benchmarks/pending_changes_cost.py --jobs 20000
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from msgspec.structs import replace

from tests.support.factories import CLUSTER

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.controller_cost import (  # noqa: E402
    INTERVAL,
    POLL_USER,
    Rpcs,
    _by_kind,
    all_job_ids,
    cancel_all,
    command_times,
    held_job_ids,
    max_job_count,
    measure_query,
    read_stats,
    reset_stats,
    submit,
)
from bot.config import DatabaseConfig, SlurmConfig, load_config  # noqa: E402
from scheduler.slurm.pending_changes import PENDING_LISTING  # noqa: E402
from scheduler.slurm.poller import SlurmPoller  # noqa: E402
from store.snapshots import load_snapshot  # noqa: E402
from store.writer import StoreWriter  # noqa: E402
from tests.support.slurm_wrappers import COMMANDS, as_user, write_wrappers  # noqa: E402

CHANGED_PER_POLL = 5
# Far longer than the run: the listing only on the first poll.
NEVER = 10_000.0
# Shorter than any poll: the listing on every poll, as 15 s polls with a 30 s bound run it.
EVERY_POLL = 0.001


def write_wrappers_by_kind(directory: Path, runs: Path) -> None:
    """The real commands as the poll user, each run's kind and wall time logged."""
    bodies = {}
    for command in COMMANDS:
        body = as_user(POLL_USER, command).removeprefix("exec ")
        bodies[command] = (
            f"kind={command}\n"
            'case " $* " in *" --only-job-state "*) kind="$kind states";;'
            ' *" --Format="*) kind="$kind pending-listing";;'
            ' *" --jobs="*,*) kind="$kind list";; *" --jobs="*) kind="$kind id";; esac\n'
            "start=$(date +%s%N)\n"
            f"{body}\nrc=$?\n"
            f'echo "$kind $start $(date +%s%N)" >> {runs}\n'
            "exit $rc"
        )
    write_wrappers(directory, bodies)


@dataclass
class Poll:
    label: str
    wall: float
    rpcs: Rpcs
    commands: list[tuple[str, float]]
    shown: str


async def phase(title: str, bound: float, polls: int) -> list[Poll]:
    """A fresh poller and store: its first poll, quiet polls, then polls each after
    CHANGED_PER_POLL held jobs were moved to the debug partition."""
    results = []
    with tempfile.TemporaryDirectory(prefix="skybot-pending-") as tmp:
        bin_dir, runs = Path(tmp) / "bin", Path(tmp) / "runs.log"
        write_wrappers_by_kind(bin_dir, runs)
        runs.write_text("")
        config = replace(
            load_config(None),
            slurm=SlurmConfig(
                bin_dir=str(bin_dir), command_timeout_seconds=300, pending_changes_seconds=bound
            ),
            database=DatabaseConfig(path=f"{tmp}/skybot.db"),
        )
        writer = StoreWriter(config.database.path)
        poller = SlurmPoller(config.default_cluster, config, writer)
        moved: list[int] = []
        try:
            for label in ["first"] + ["quiet"] * polls + [f"{CHANGED_PER_POLL} changed"] * polls:
                if label.endswith("changed"):
                    moved = [int(i) for i in held_job_ids()[-CHANGED_PER_POLL:]]
                    for job_id in moved:
                        subprocess.run(
                            ["scontrol", "update", f"JobId={job_id}", "Partition=debug"],
                            check=True,
                        )
                reset_stats()
                started = time.perf_counter()
                if not await poller.poll_jobs():
                    raise RuntimeError(f"{title}, {label}: a poll failed")
                wall = time.perf_counter() - started
                rpcs = read_stats()
                shown = ""
                if moved:
                    jobs = (await writer.run(load_snapshot, CLUSTER)).jobs
                    partition = {job.job_id: job.partition for job in jobs}
                    count = sum(partition.get(job_id) == "debug" for job_id in moved)
                    shown = f"{count}/{len(moved)} shown"
                    # Back where they were, so that the next poll's are new changes.
                    for job_id in moved:
                        subprocess.run(["scancel", str(job_id)], check=True)
                results.append(Poll(f"{title}, {label}", wall, rpcs, command_times(runs), shown))
        finally:
            await poller.close()
            writer.close()
    return results


def print_polls(polls: list[Poll]) -> None:
    print(
        f"\nskybot's poll (commands as {POLL_USER!r}); share of the default {INTERVAL:g} s "
        "interval; ctld ms = slurmctld's read RPCs (sdiag total_time)"
    )
    print(f"{'':40}{'wall s':>8}{'share':>7}{'ctld ms':>9}  changes  detail")
    for poll in polls:
        commands = ", ".join(
            f"{kind}{f' {count}x' if count > 1 else ''} {wall:.2f}s"
            for kind, (count, wall) in _by_kind(poll.commands).items()
        )
        print(
            f"{poll.label:40}{poll.wall:>8.2f}{poll.wall / INTERVAL:>7.1%}"
            f"{poll.rpcs.ctld_ms():>9.1f}  {poll.shown:8} RPCs ms: {poll.rpcs.ctld_summary()};"
            f" commands: {commands}"
        )


def print_queries(reads: int) -> None:
    queries = {
        "pending listing (skybot's, text)": ["squeue", *PENDING_LISTING],
        "squeue --all --json --states=PENDING": ["squeue", "--all", "--json", "--states=PENDING"],
        "squeue --all --json": ["squeue", "--all", "--json"],
        "squeue --all --only-job-state --json": ["squeue", "--all", "--only-job-state", "--json"],
    }
    print(f"\nEach query alone, {reads} reads, per read:")
    print(f"{'':40}{'wall s':>8}{'ctld ms':>9}{'MB':>8}  RPCs ms")
    for name, command in queries.items():
        row = measure_query(command, reads)
        if row is None:
            print(f"{name:40}  (not in this Slurm)")
            continue
        wall, rpcs, size = row
        print(
            f"{name:40}{wall:>8.3f}{rpcs.ctld_ms() / reads:>9.2f}{size / 1e6:>8.2f}"
            f"  {rpcs.ctld_summary()} (over {reads})"
        )


async def run(args: argparse.Namespace) -> int:
    version = subprocess.run(["squeue", "--version"], capture_output=True, text=True).stdout
    print(f"{version.strip()}: {args.jobs:,} held jobs wanted")
    cancel_all()
    if max_job_count() - len(all_job_ids()) < args.jobs * 1.05:
        print("slurmctld has too little room for that many jobs (MaxJobCount)")
        return 1
    took = submit(args.jobs)
    print(f"{len(held_job_ids()):,} held jobs listed by squeue (submitted in {took:.0f} s)")
    polls = await phase("before: no listing", NEVER, args.polls)
    polls += await phase("after: listing every poll", EVERY_POLL, args.polls)
    print_polls(polls)
    print_queries(args.reads)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--polls", type=int, default=3, help="polls of each kind")
    parser.add_argument("--reads", type=int, default=3, help="reads of each query alone")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        return asyncio.run(run(args))
    finally:
        cancel_all()
        print(f"cancelled; {len(held_job_ids())} held jobs left")


if __name__ == "__main__":
    sys.exit(main())
