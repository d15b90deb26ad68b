"""Benchmark: skybot's polls after a mass cancel of held jobs, before and after issue 26.

The four test users queue --jobs held jobs (benchmarks/controller_cost.py's way), skybot's
own poller (SlurmPoller, commands as the `skybot` user) polls them every `[slurm]
poll_seconds`, then every one of them is cancelled at once and the poller goes on for
--polls polls. Twice, side by side:

  * before: sacct looks back `sacct_overlap_seconds` (300 s) before the last poll, every
    poll, so every poll for five minutes re-reads all the cancelled jobs;
  * after: sacct looks back from when sdiag last showed slurmctld's queue to slurmdbd
    empty, once a later sacct has answered (scheduler/slurm/sacct_window.py).

Each poll reports its wall time, slurmctld's read RPC time (sdiag) and slurmdbd's sacct time
(`sacctmgr show stats`), the size of sacct's output, and the RSS of the bot's process (this
one: the poller and the store's writer) and of the poll worker. Hold the cluster's lock
for the whole run:

    flock -o /tmp/skybot-cluster-24.11.lock deploy/testcluster-24.11.sh run \\
        python benchmarks/mass_cancel.py --jobs 20000
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.controller_cost import (  # noqa: E402
    INTERVAL,
    PollRun,
    all_job_ids,
    cancel_all,
    held_job_ids,
    max_job_count,
    submit,
)


@dataclass
class Sample:
    label: str
    wall: float
    ctld_ms: float
    dbd_ms: float
    sacct_mb: float
    sacct_s: float
    bot_mb: float
    worker_mb: float


def rss_mb(pid: int | str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def run_mode(title: str, full_look_back: bool, jobs: int, polls: int) -> list[Sample]:
    """A fresh poller and store over `jobs` held jobs: two polls, the mass cancel, `polls`
    more, each `INTERVAL` after the last one started."""
    cancel_all()
    took = submit(jobs)
    print(f"{title}: {len(held_job_ids()):,} held jobs queued in {took:.0f} s", flush=True)
    samples: list[Sample] = []
    with tempfile.TemporaryDirectory(prefix="skybot-mass-cancel-") as tmp:
        run = PollRun(tmp, full_only=False)
        poller = run.poller
        if full_look_back:

            async def never_caught_up() -> None:
                return None

            poller._dbd_queue_empty_at = never_caught_up  # type: ignore[method-assign]
        try:
            plan = ["held", "held"] + [f"+{n * INTERVAL:g} s" for n in range(polls)]
            for number, label in enumerate(plan):
                started = time.monotonic()
                if number == 2:
                    cancel_all()  # waits until squeue lists none of them pending
                    label = f"{label} (cancelled)"
                try:
                    poll = await run.poll(label)
                except RuntimeError:
                    # 24.11's slurmctld, busy with the cancelled jobs, once answered
                    # --only-job-state with "Unspecified error": the poller backs off.
                    samples.append(Sample(f"{label} failed", *(0.0,) * 7))
                    print(f"  {label:24} failed", flush=True)
                    await asyncio.sleep(max(0.0, INTERVAL - (time.monotonic() - started)))
                    continue
                sacct = Path(poller._spool_dir or tmp) / "sacct.json"
                kinds = dict(_sacct_time(poll.commands))
                samples.append(
                    Sample(
                        label,
                        poll.wall,
                        poll.rpcs.ctld_ms(),
                        poll.rpcs.dbd_ms(),
                        sacct.stat().st_size / 1e6 if sacct.exists() else 0.0,
                        kinds.get("sacct", 0.0),
                        rss_mb("self"),
                        rss_mb(poller._worker.pid) if poller._worker.pid else 0.0,
                    )
                )
                print(f"  {label:24} {poll.wall:6.2f} s", flush=True)
                await asyncio.sleep(max(0.0, INTERVAL - (time.monotonic() - started)))
        finally:
            await run.close()
    return samples


def _sacct_time(commands: list[tuple[str, float]]) -> list[tuple[str, float]]:
    return [(kind, wall) for kind, wall in commands if kind == "sacct"]


def print_side_by_side(before: list[Sample], after: list[Sample]) -> None:
    columns = f"{'wall s':>7}{'ctld ms':>8}{'dbd ms':>8}{'sacct MB':>9}{'bot MB':>7}{'wkr MB':>7}"
    print(
        f"\nPolls every {INTERVAL:g} s around a mass cancel; ctld ms = slurmctld's read RPCs"
        " (sdiag), dbd ms = slurmdbd's DBD_GET_JOBS_COND (sacctmgr show stats), RSS after"
        " each poll"
    )
    print(f"{'':26}{'before (300 s look-back)':^46}  {'after (from slurmdbd caught up)':^46}")
    print(f"{'':26}{columns}  {columns}")
    for old, new in zip(before, after, strict=True):
        print(f"{old.label:26}{_row(old)}  {_row(new)}")
    for name, samples in (("before", before), ("after", after)):
        cancelled = [s for s in samples[2:] if not s.label.endswith("failed")]
        heavy = sum(1 for s in cancelled if s.sacct_mb > 10 * max(samples[1].sacct_mb, 0.1))
        print(
            f"{name}: {heavy} of {len(cancelled)} polls that answered after the cancel re-read the"
            " cancelled"
            f" jobs; wall s {sum(s.wall for s in cancelled):.1f} in all; bot RSS"
            f" {samples[1].bot_mb:.0f} MB before the cancel, peak"
            f" {max(s.bot_mb for s in cancelled):.0f}, last {cancelled[-1].bot_mb:.0f};"
            f" worker {samples[1].worker_mb:.0f} / {max(s.worker_mb for s in cancelled):.0f}"
            f" / {cancelled[-1].worker_mb:.0f} MB"
        )


def _row(s: Sample) -> str:
    return (
        f"{s.wall:>7.2f}{s.ctld_ms:>8.1f}{s.dbd_ms:>8.0f}{s.sacct_mb:>9.2f}"
        f"{s.bot_mb:>7.0f}{s.worker_mb:>7.0f}"
    )


async def run(args: argparse.Namespace) -> int:
    room = max_job_count() - len(all_job_ids())
    if room < args.jobs * 1.05:
        print(f"slurmctld has room for {room:,} more jobs (MaxJobCount): too few")
        return 1
    before = await run_mode("before", True, args.jobs, args.polls)
    after = await run_mode("after", False, args.jobs, args.polls)
    print_side_by_side(before, after)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--polls", type=int, default=8, help="polls after the cancel")
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
