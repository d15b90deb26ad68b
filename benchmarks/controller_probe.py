"""Benchmark: what skybot asks of slurmctld per minute, polling normally and during an outage.

During an outage (the controller refusing or timing out), skybot backs off the full poll
(squeue + nodes) but asks `scontrol ping` once per poll interval, so it is current again one
poll after Slurm answers. This measures both with sdiag, on the real test cluster
(deploy/testcluster.sh up): the poller's Slurm commands run as the `skybot` user, so sdiag's
"by user" statistics count them apart from everything else.

Two outages are played by wrapper scripts around the real commands: the controller down
(every controller command fails: the probe's pings are all it is asked), and the controller
struggling (it answers pings, but the poll fails: then it gets the whole back-off, with
nothing in between). Commands other than sacct (slurmdbd's, not the controller's) count.

    python3 benchmarks/controller_probe.py [--cycles 12] [--poll-seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from msgspec.structs import replace

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.config import DatabaseConfig, SlurmConfig, load_config  # noqa: E402
from scheduler.slurm.poller import SlurmPoller  # noqa: E402
from store.writer import StoreWriter  # noqa: E402
from tests.support.slurm_wrappers import COMMANDS, as_user, write_wrappers  # noqa: E402

CONTROLLER_COMMANDS = ("squeue", "sinfo")
PHASES = (
    ("normal polling", None),
    # slurmctld unreachable: every controller command fails without reaching it.
    ("controller down", "down"),
    # slurmctld answers pings but the poll's RPCs time out: overloaded.
    ("controller struggling", "struggling"),
)


def sdiag_of(user: str) -> tuple[int, int]:
    """(RPC count, total µs) slurmctld has served `user` since it started."""
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    by_user = out.split("Remote Procedure Call statistics by user", 1)[1]
    match = re.search(
        rf"^\s*{user}\s+\(\s*\d+\)\s+count:(\d+)\s+ave_time:\d+\s+total_time:(\d+)",
        by_user,
        re.MULTILINE,
    )
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def write_logged_wrappers(directory: Path, state: Path, runs: Path) -> None:
    """The real commands as `skybot`, each run logged; the controller's fail as `state` says."""
    bodies = {}
    for command in COMMANDS:
        fail = ""
        if command in CONTROLLER_COMMANDS:
            fail = f"grep -q . {state} && exit 1\n"
        elif command == "scontrol":
            fail = f"grep -q down {state} && exit 1\n"
        bodies[command] = f"echo {command} >> {runs}\n{fail}{as_user('skybot', command)}"
    write_wrappers(directory, bodies)


async def measure(cycles: int, poll_seconds: float) -> list[tuple[str, int, int, int]]:
    """Per phase: (name, commands run, slurmctld RPCs, slurmctld µs) over `cycles` polls."""
    with tempfile.TemporaryDirectory() as tmp:
        bin_dir = Path(tmp) / "bin"
        state = Path(tmp) / "controller-state"
        state.write_text("")
        runs = Path(tmp) / "runs.log"
        runs.write_text("")
        write_logged_wrappers(bin_dir, state, runs)
        config = replace(
            load_config(None),
            slurm=SlurmConfig(bin_dir=str(bin_dir), poll_seconds=poll_seconds),
            database=DatabaseConfig(path=f"{tmp}/skybot.db"),
        )
        writer = StoreWriter(config.database.path)
        now = [time.time()]
        poller = SlurmPoller(config.default_cluster, config, writer, clock=lambda: now[0])
        results = []
        try:
            await poller.poll_jobs()  # warm-up: the first sacct window, the nodes' source
            for phase, controller in PHASES:
                state.write_text(controller or "")
                for _ in range(3):  # into the back-off, as an outage of a few polls would
                    now[0] += poll_seconds
                    await poller.poll_jobs()
                before = sdiag_of("skybot")
                runs.write_text("")
                for _ in range(cycles):
                    now[0] += poll_seconds
                    answered = await poller.poll_jobs()
                    assert answered is (controller is None), (phase, answered)
                after = sdiag_of("skybot")
                commands = [c for c in runs.read_text().split() if c != "sacct"]
                results.append((phase, len(commands), after[0] - before[0], after[1] - before[1]))
        finally:
            writer.close()
        return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=12)
    parser.add_argument("--poll-seconds", type=float, default=5.0)
    args = parser.parse_args()
    results = asyncio.run(measure(args.cycles, args.poll_seconds))
    per_minute = 60.0 / args.poll_seconds / args.cycles
    print(
        f"What skybot asks of slurmctld, {args.cycles} polls every {args.poll_seconds:g} s "
        "(commands as run; RPCs and time as sdiag counts them)"
    )
    print(f"{'':24}{'commands/min':>14}{'RPCs/min':>10}{'µs/min':>10}")
    for phase, commands, rpcs, micros in results:
        print(
            f"{phase:24}{commands * per_minute:>14.1f}{rpcs * per_minute:>10.1f}"
            f"{micros * per_minute:>10.0f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
