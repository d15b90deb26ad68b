"""Benchmark: what skybot's poll costs the real controller with 20,000 held jobs, before and after.

Against the cluster this runs on (the host's 22.05 one, or the 24.11 sandbox through
`deploy/testcluster-24.11.sh run`): the four test users queue --jobs held jobs (individual
jobs: a pending array would be one record), then skybot's own poller (SlurmPoller, the
commands of scheduler/slurm/commands.py, as the `skybot` user) polls them, and each poll
reports:

  * slurmctld's RPC time for it (sdiag, reset before each poll: count and total time per
    message type, and everything the `skybot` user asked), slurmdbd's for its sacct
    (`sacctmgr show stats`, cleared before each poll);
  * the poll's wall time, each command's, and the poll's share of the interval (the default
    `[slurm] poll_seconds`).

Phases: before, the full poll every interval (`squeue --all --json`: the poller is shown a
squeue without --only-job-state, as 22.05's is); after, the poller as it runs on this
Slurm: on 24.05+ every job's id and state (`--only-job-state`), and full records only for
jobs that are new or changed state, quiet (nothing changed) and with 2% of the jobs
changed before each poll (1% cancelled, 1% new). On 24.05+, then a few changed: 5 and 50
new jobs (as many held ones cancelled) before each poll, fetched alternately as one
`--jobs=` list and one id at a time (`squeue --json --jobs=ID` each), whatever
ONE_BY_ONE_MAX says. Then the cheaper ways one might learn "nothing changed", each command
alone, sdiag reset before it. Every held job is cancelled at the end, also on failure or
Ctrl-C. Hold the cluster lock for the whole run (4-5 min at 20,000):

    flock -o /tmp/skybot-cluster.lock python3 benchmarks/controller_cost.py --jobs 20000
    flock -o /tmp/skybot-cluster.lock deploy/testcluster-24.11.sh run \\
        python benchmarks/controller_cost.py --jobs 20000
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from msgspec.structs import replace

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.config import DatabaseConfig, SlurmConfig, load_config  # noqa: E402
from scheduler.slurm import job_reads  # noqa: E402
from scheduler.slurm.job_reads import FULL_RECORDS_EVERY  # noqa: E402
from scheduler.slurm.poller import SlurmPoller  # noqa: E402
from store.writer import StoreWriter  # noqa: E402
from tests.support.slurm_wrappers import COMMANDS, as_user, write_wrappers  # noqa: E402

NAME = "skybot-controller-cost"
USER_ACCOUNTS = {
    "alice": "hoffman-lab",
    "bob": "hoffman-lab",
    "carol": "kira-lab",
    "dave": "kira-lab",
}
SBATCH_PER_USER = 3
POLL_USER = "skybot"
INTERVAL = SlurmConfig().poll_seconds
# What a poll or a "what changed" query asks slurmctld for; the rest of sdiag's table is
# submissions, cancels, slurmd traffic and sdiag itself.
READ_RPCS = (
    "REQUEST_JOB_INFO",
    "REQUEST_JOB_INFO_SINGLE",
    "REQUEST_JOB_USER_INFO",
    "REQUEST_JOB_STATE",
    "REQUEST_NODE_INFO",
    "REQUEST_PARTITION_INFO",
    "REQUEST_FED_INFO",
)
CHANGED_SHARE = 0.02
FEW_CHANGED = (5, 50)
# How the few changed jobs' records are fetched: ONE_BY_ONE_MAX forced either way.
FETCH_WAYS = {"one list": -1, "one by one": 1 << 30}
# The squeue as 22.05's looks to the poller: --only-job-state is refused before any RPC.
NO_STATES_ONLY = (
    'case " $* " in *" --only-job-state "*)\n'
    "  echo \"squeue: unrecognized option '--only-job-state'\" >&2; exit 1;;\nesac\n"
)


# --------------------------------------------------------------------------------------------
# The held jobs.


def submit(jobs: int) -> float:
    """Queue `jobs` held jobs, split between the test users; returns the seconds it took."""
    started = time.perf_counter()
    share = -(-jobs // len(USER_ACCOUNTS))
    processes = []
    for index, (user, account) in enumerate(USER_ACCOUNTS.items()):
        count = min(share, jobs - index * share)
        script = (
            f"seq {count} | xargs -P {SBATCH_PER_USER} -I{{}} sbatch --hold --parsable "
            f"-p {account} -A {account} -J {NAME} --output=/dev/null --chdir=/tmp "
            "--wrap true > /dev/null"
        )
        processes.append(subprocess.Popen(["runuser", "-u", user, "--", "sh", "-c", script]))
    for process in processes:
        process.wait()  # a refused sbatch or two shows in the count below, not as a failure
    return time.perf_counter() - started


def held_job_ids() -> list[str]:
    out = subprocess.run(
        ["squeue", "--all", "-h", "-n", NAME, "-t", "PENDING", "-o", "%i"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


def all_job_ids() -> list[str]:
    out = subprocess.run(
        ["squeue", "--all", "-h", "-t", "all", "-o", "%i"], capture_output=True, text=True
    ).stdout
    return out.split()


def max_job_count() -> int:
    config = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, check=True
    ).stdout
    match = re.search(r"^MaxJobCount\s*=\s*(\d+)", config, re.M)
    return int(match[1]) if match else 10_000


def cancel_all() -> None:
    """Cancel every job this benchmark queued and wait until none is pending."""
    for user in USER_ACCOUNTS:
        subprocess.run(["scancel", "-u", user, "-n", NAME], check=False)
    deadline = time.monotonic() + 120
    while held_job_ids() and time.monotonic() < deadline:
        time.sleep(1)


def cancel(job_ids: list[str]) -> None:
    for start in range(0, len(job_ids), 1000):
        subprocess.run(["scancel", *job_ids[start : start + 1000]], check=True)


# --------------------------------------------------------------------------------------------
# slurmctld's and slurmdbd's own statistics.


@dataclass
class Rpcs:
    by_type: dict[str, tuple[int, int]] = field(default_factory=dict)  # (count, µs)
    poll_user: tuple[int, int] = (0, 0)
    dbd: dict[str, tuple[int, int]] = field(default_factory=dict)

    def ctld_ms(self) -> float:
        return sum(self.by_type.get(t, (0, 0))[1] for t in READ_RPCS) / 1000

    def ctld_summary(self) -> str:
        parts = [
            f"{t.removeprefix('REQUEST_')} {c}x {us / 1000:.1f}"
            for t, (c, us) in self.by_type.items()
            if t in READ_RPCS and c
        ]
        return ", ".join(parts)

    def dbd_ms(self) -> float:
        return self.dbd.get("DBD_GET_JOBS_COND", (0, 0))[1] / 1000


_RPC_LINE = re.compile(
    r"^\s*(\w+)\s+\(\s*\d+\)\s+count:(\d+)\s+ave_time:\d+\s+total_time:(\d+)", re.M
)


def _rpc_table(text: str, start: str, end: str) -> dict[str, tuple[int, int]]:
    section = text.split(start, 1)[-1].split(end, 1)[0]
    return {m[1]: (int(m[2]), int(m[3])) for m in _RPC_LINE.finditer(section)}


def reset_stats() -> None:
    subprocess.run(["sdiag", "--reset"], capture_output=True, check=True)
    subprocess.run(["sacctmgr", "-i", "clear", "stats"], capture_output=True, check=False)


def read_stats() -> Rpcs:
    ctld = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    by_type = _rpc_table(ctld, "statistics by message type", "statistics by user")
    by_user = _rpc_table(ctld, "statistics by user", "Pending RPC")
    dbd = subprocess.run(
        ["sacctmgr", "show", "stats"], capture_output=True, text=True, check=False
    ).stdout
    return Rpcs(
        by_type,
        by_user.get(POLL_USER, (0, 0)),
        _rpc_table(dbd, "statistics by message type", "statistics by user"),
    )


# --------------------------------------------------------------------------------------------
# skybot's poll.


@dataclass
class Poll:
    label: str
    wall: float
    rpcs: Rpcs
    commands: list[tuple[str, float]]


def write_poll_wrappers(directory: Path, runs: Path, full_only: bool) -> None:
    """The real commands as the poll user, each run's kind and wall time logged."""
    bodies = {}
    for command in COMMANDS:
        refuse = NO_STATES_ONLY if full_only and command == "squeue" else ""
        # What kind of read it was: the job list can be 100,000 characters long.
        body = as_user(POLL_USER, command).removeprefix("exec ")
        bodies[command] = (
            f"{refuse}kind={command}\n"
            'case " $* " in *" --only-job-state "*) kind="$kind states";;'
            ' *" --jobs="*,*) kind="$kind list";; *" --jobs="*) kind="$kind id";; esac\n'
            "start=$(date +%s%N)\n"
            f"{body}\nrc=$?\n"
            f'echo "$kind $start $(date +%s%N)" >> {runs}\n'
            "exit $rc"
        )
    write_wrappers(directory, bodies)


def command_times(runs: Path) -> list[tuple[str, float]]:
    times = []
    for line in runs.read_text().splitlines():
        *kind, start, end = line.split()
        times.append((" ".join(kind), (int(end) - int(start)) / 1e9))
    runs.write_text("")
    return times


class PollRun:
    """A fresh poller and store with the commands as POLL_USER, each run's wall time logged."""

    def __init__(self, tmp: str, full_only: bool) -> None:
        bin_dir, self.runs = Path(tmp) / "bin", Path(tmp) / "runs.log"
        write_poll_wrappers(bin_dir, self.runs, full_only)
        self.runs.write_text("")
        config = replace(
            load_config(None),
            slurm=SlurmConfig(bin_dir=str(bin_dir), command_timeout_seconds=300),
            database=DatabaseConfig(path=f"{tmp}/skybot.db"),
        )
        self.writer = StoreWriter(config.database.path)
        self.poller = SlurmPoller(config.default_cluster, config, self.writer)

    async def poll(self, label: str) -> Poll:
        reset_stats()
        started = time.perf_counter()
        if not await self.poller.poll_jobs():
            raise RuntimeError(f"{label}: a poll failed (see the log above)")
        wall = time.perf_counter() - started
        return Poll(label, wall, read_stats(), command_times(self.runs))

    async def close(self) -> None:
        await self.poller.close()
        self.writer.close()


async def poll_phase(
    title: str, full_only: bool, quiet_polls: int, changed_polls: int
) -> list[Poll]:
    """A fresh poller and store: its first poll, then quiet polls, then polls after 1% of the
    held jobs were cancelled and as many new ones queued."""
    polls = []
    with tempfile.TemporaryDirectory(prefix="skybot-cost-") as tmp:
        run = PollRun(tmp, full_only)
        try:
            plan = ["first"] + ["quiet"] * quiet_polls + ["2% changed"] * changed_polls
            for label in plan:
                if label == "2% changed":
                    # Half ended, half new: what a busy queue's interval brings.
                    changed = int(len(held_job_ids()) * CHANGED_SHARE)
                    cancel(held_job_ids()[: changed // 2])
                    submit(changed - changed // 2)
                polls.append(await run.poll(f"{title}, {label}"))
        finally:
            await run.close()
    return polls


async def few_changed_phase(rounds: int) -> list[Poll]:
    """After a first poll, `count` new jobs before each poll (as many held ones cancelled,
    which are not fetched: ended), fetched as one list and one by one in turn."""
    polls = []
    if 1 + rounds * len(FEW_CHANGED) * len(FETCH_WAYS) >= FULL_RECORDS_EVERY:
        raise ValueError(f"too many polls: the {FULL_RECORDS_EVERY}th reads every record")
    saved = job_reads.ONE_BY_ONE_MAX
    with tempfile.TemporaryDirectory(prefix="skybot-cost-") as tmp:
        run = PollRun(tmp, full_only=False)
        try:
            first = await run.poll("few changed, first")
            if "squeue states" not in _by_kind(first.commands):
                print("\nfew changed: this squeue has no --only-job-state; skipped")
                return []
            for count in FEW_CHANGED:
                for _ in range(rounds):
                    for way, most in FETCH_WAYS.items():
                        cancel(held_job_ids()[:count])
                        submit(count)
                        job_reads.ONE_BY_ONE_MAX = most
                        polls.append(await run.poll(f"{count} new, {way}"))
        finally:
            job_reads.ONE_BY_ONE_MAX = saved
            await run.close()
    return polls


# --------------------------------------------------------------------------------------------
# Each "what changed" query alone.


def query_ways(some_ids: list[str]) -> dict[str, list[str]]:
    return {
        "squeue --all --json": ["squeue", "--all", "--json"],
        "squeue --all -h -o '%i %T' (text)": ["squeue", "--all", "-h", "-o", "%i %T"],
        "squeue --all --only-job-state --json": ["squeue", "--all", "--only-job-state", "--json"],
        f"squeue --json --jobs=<{len(some_ids)} ids>": [
            "squeue",
            "--json",
            f"--jobs={','.join(some_ids)}",
        ],
        "squeue --json --jobs=<1 id>": ["squeue", "--json", f"--jobs={some_ids[0]}"],
        "scontrol show jobs --json": ["scontrol", "show", "jobs", "--json"],
    }


def measure_query(command: list[str], reads: int) -> tuple[float, Rpcs, int] | None:
    """(wall s per read, RPCs over all reads, output bytes), or None if this Slurm refuses it."""
    reset_stats()
    started = time.perf_counter()
    size = 0
    for _ in range(reads):
        done = subprocess.run(command, capture_output=True)
        if done.returncode != 0:
            return None
        size = len(done.stdout)
    wall = (time.perf_counter() - started) / reads
    return wall, read_stats(), size


def measure_iterate(seconds: float) -> Rpcs:
    """`squeue --iterate=1` sends the previous answer's update time with each read after its
    first, and slurmctld answers "no change" without packing a record if nothing changed:
    the one way a client command uses that. Counted from its second read on."""
    process = subprocess.Popen(
        ["squeue", "--all", "-h", "-o", "%i", "--iterate=1"], stdout=subprocess.DEVNULL
    )
    try:
        time.sleep(3.0)  # its first (full) read is done, and printed
        reset_stats()
        time.sleep(seconds)
        return read_stats()
    finally:
        process.kill()
        process.wait()


# --------------------------------------------------------------------------------------------


def print_polls(polls: list[Poll]) -> None:
    print(
        f"\nskybot's poll (SlurmPoller.poll_jobs, commands as {POLL_USER!r}); share of the "
        f"default {INTERVAL:g} s interval; RPC ms = slurmctld's read RPCs (sdiag total_time)"
    )
    print(f"{'':36}{'wall s':>8}{'share':>7}{'ctld ms':>9}{'user ms':>9}{'dbd ms':>8}  detail")
    for poll in polls:
        user_count, user_us = poll.rpcs.poll_user
        commands = ", ".join(
            f"{kind}{f' {count}x' if count > 1 else ''} {wall:.2f}s"
            for kind, (count, wall) in _by_kind(poll.commands).items()
        )
        print(
            f"{poll.label:36}{poll.wall:>8.2f}{poll.wall / INTERVAL:>7.1%}"
            f"{poll.rpcs.ctld_ms():>9.1f}{user_us / 1000:>9.1f}{poll.rpcs.dbd_ms():>8.1f}"
            f"  RPCs ms: {poll.rpcs.ctld_summary()} ({user_count} from {POLL_USER});"
            f" commands: {commands}"
        )


def _by_kind(commands: list[tuple[str, float]]) -> dict[str, tuple[int, float]]:
    """(runs, wall s in all) by kind of command, in order of first run."""
    kinds: dict[str, tuple[int, float]] = {}
    for kind, wall in commands:
        count, total = kinds.get(kind, (0, 0.0))
        kinds[kind] = (count + 1, total + wall)
    return kinds


def print_few_changed(polls: list[Poll]) -> None:
    """Side by side: the same number of new jobs fetched as a list and one id at a time."""
    if not polls:
        return
    print(
        f"\nA few jobs new per poll (as many cancelled), {INTERVAL:g} s interval: slurmctld ms"
        " per poll (sdiag), min-max over the polls"
    )
    print(f"{'':12}{'one list':>40}{'one by one':>40}")
    print(f"{'':12}" + f"{'ctld ms':>12}{'of which job reads':>19}{'wall s':>11}" * 2)
    for count in FEW_CHANGED:
        row = f"{f'{count} new':12}"
        for way in FETCH_WAYS:
            mine = [p for p in polls if p.label == f"{count} new, {way}"]
            ctld = [p.rpcs.ctld_ms() for p in mine]
            info = [sum(p.rpcs.by_type.get(t, (0, 0))[1] for t in _JOB_INFO) / 1000 for p in mine]
            wall = [p.wall for p in mine]
            row += f"{_span(ctld, 1):>12}{_span(info, 1):>19}{_span(wall, 2):>11}"
        print(row)


_JOB_INFO = ("REQUEST_JOB_INFO", "REQUEST_JOB_INFO_SINGLE")


def _span(values: list[float], digits: int) -> str:
    low, high = (f"{value:.{digits}f}" for value in (min(values), max(values)))
    return low if low == high else f"{low}-{high}"


def print_queries(rows: dict[str, tuple[float, Rpcs, int] | None], reads: int) -> None:
    print(f"\nEach query alone, {reads} reads, per read:")
    print(f"{'':40}{'wall s':>8}{'ctld ms':>9}{'MB':>8}  RPCs ms")
    for name, row in rows.items():
        if row is None:
            print(f"{name:40}  (not in this Slurm)")
            continue
        wall, rpcs, size = row
        print(
            f"{name:40}{wall:>8.3f}{rpcs.ctld_ms() / reads:>9.2f}{size / 1e6:>8.2f}"
            f"  {rpcs.ctld_summary()} (over {reads})"
        )


def print_iterate(rpcs: Rpcs) -> None:
    count, total = rpcs.by_type.get("REQUEST_JOB_INFO", (0, 0))
    each = total / count / 1000 if count else 0.0
    print(
        f"\nsqueue --iterate=1 after its first read: {count} REQUEST_JOB_INFO, "
        f"{total / 1000:.2f} ms in all, {each:.3f} ms each (its previous update time sent)"
    )


async def run(args: argparse.Namespace) -> int:
    version = subprocess.run(["squeue", "--version"], capture_output=True, text=True).stdout
    print(f"{version.strip()}: {args.jobs:,} held jobs wanted")
    cancel_all()
    room = max_job_count() - len(all_job_ids())
    if room < args.jobs * 1.05:
        # sbatch would retry forever at the limit: say so instead.
        print(f"slurmctld has room for {room:,} more jobs (MaxJobCount): too few; run `up`")
        return 1
    took = submit(args.jobs)
    ids = held_job_ids()
    print(f"{len(ids):,} held jobs listed by squeue (submitted in {took:.0f} s)")
    if len(ids) < args.jobs * 0.99:
        raise RuntimeError("too few jobs were queued: is MaxJobCount above --jobs?")
    polls = await poll_phase("before: full poll", True, args.polls, 0)
    polls += await poll_phase("after: as skybot polls now", False, args.polls, args.polls)
    few = await few_changed_phase(args.few_polls)
    print_polls(polls + few)
    print_few_changed(few)
    some = held_job_ids()
    rows = {
        name: measure_query(command, args.reads)
        for name, command in query_ways(some[: int(len(some) * CHANGED_SHARE)]).items()
    }
    print_queries(rows, args.reads)
    print_iterate(measure_iterate(5.0))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--polls", type=int, default=3, help="steady polls of each kind")
    parser.add_argument("--reads", type=int, default=3, help="reads of each query alone")
    parser.add_argument(
        "--few-polls", type=int, default=2, help="polls of each few-changed count and way"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # A kill (a timeout around the lock) still cancels the jobs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        return asyncio.run(run(args))
    finally:
        cancel_all()
        print(f"cancelled; {len(held_job_ids())} held jobs left")


if __name__ == "__main__":
    sys.exit(main())
