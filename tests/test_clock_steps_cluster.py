"""A wall-clock step under a running `skybot run` on the real cluster (issue 28, item 1).

NTP stepping the clock back an hour used to stop every poll for that hour (APScheduler's
interval triggers run on the wall clock) while readiness said the snapshot was -3552 s old.
Here libfaketime steps the bot's wall clock back 1 h and forward 1 h again, the monotonic
clock untouched: polls keep their interval, a job that ends after each step gets its DM
within two polls, and no age is ever negative.

Only the bot's clock steps, not the controller's: each sacct window still starts just before
Slurm's now. Made from the bot's clock, it started an hour back in Slurm's time, and on CI's
cluster (thousands of jobs ended in that hour by the other tests) every poll read them all
again: 3-4 s a poll, the DM 10-17 s after the job's end.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import time
from datetime import datetime
from pathlib import Path

import aiohttp
import pytest

from bot.config import SlurmConfig
from tests.support.bot_process import SLACK_IDS, TEAM, dms_about, free_port, linked_users, start_bot
from tests.support.clock_steps import faketime_env, metric, samples, scrape, set_clock
from tests.support.cluster import sbatch_async, squeue_state, wait_for
from tests.support.slack_standin import SlackStandIn
from tests.support.slurm_wrappers import COMMANDS, write_wrappers

pytestmark = [
    pytest.mark.cluster,
    # What is checked here is the runner's and the bot's, the same whatever Slurm runs beside
    # it: proven against the host's cluster. The 24.11 sandbox has no libfaketime.
    pytest.mark.skipif(
        "SKYBOT_TESTCLUSTER" in os.environ, reason="inside the Slurm 24.11 sandbox: no libfaketime"
    ),
]

POLL_SECONDS = 2.0
OVERLAP_SECONDS = SlurmConfig().sacct_overlap_seconds
# How long each phase watches the polls after a step.
WATCH_SECONDS = 12.0


def _logging_sacct(tmp_path: Path) -> Path:
    """A bin_dir of the real commands, whose sacct logs its arguments first."""
    bin_dir = tmp_path / "bin"
    log = shlex.quote(str(tmp_path / "sacct.log"))
    bodies = {command: f'exec /usr/bin/{command} "$@"' for command in COMMANDS}
    bodies["sacct"] = f'echo "$*" >> {log}\nexec /usr/bin/sacct "$@"'
    return write_wrappers(bin_dir, bodies)


def _sacct_starts(tmp_path: Path) -> list[float]:
    """Each logged sacct's --starttime (local time, as skybot writes it), as epoch seconds."""
    starts = []
    for line in (tmp_path / "sacct.log").read_text().splitlines():
        for word in line.split():
            if word.startswith("--starttime="):
                text = word.removeprefix("--starttime=")
                starts.append(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp())
    return starts


def _config(tmp_path: Path, metrics_port: int) -> Path:
    links = ", ".join(f'"{TEAM}/{sid}" = "{user}"' for user, sid in SLACK_IDS.items())
    config = tmp_path / "skybot.toml"
    config.write_text(
        f'[slack]\nmode = "socket"\n'
        f"[slurm]\npoll_seconds = {POLL_SECONDS}\ncaps_poll_seconds = {POLL_SECONDS}\n"
        f'bin_dir = "{_logging_sacct(tmp_path)}"\n'
        # Polls here may take a second on a busy test host (libfaketime reads its file on
        # every clock call): the interval under test must not stretch with that.
        "max_poll_share = 1.0\n"
        f"[storage]\npoll_seconds = {POLL_SECONDS}\n"
        f'[database]\npath = "{tmp_path}/skybot.db"\n'
        f"[identity]\nlinks = {{ {links} }}\n"
        '[notifications]\ndefault_preference = "all"\n'
        f'[metrics]\nport = {metrics_port}\nhost = "127.0.0.1"\n'
    )
    return config


async def _poll_counts(port: int) -> dict[str, float]:
    text = await scrape(port)
    counts = {}
    for source in ("slurm", "caps", "storage"):
        count = metric(
            text, "skybot_poll_duration_seconds_count", f'cluster="skynet",source="{source}"'
        )
        counts[source] = count or 0.0
    return counts


async def _readiness(port: int) -> dict[str, object]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/readyz") as response,
    ):
        body: dict[str, object] = await response.json()
        return body


async def _dm_delay_after_job_end(slack: SlackStandIn) -> float:
    """Run a short job as alice; seconds from when Slurm shows it ended to its DM."""
    job = await sbatch_async(
        "alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "-J", "stepped", "--wrap", "sleep 2"
    )
    await wait_for(lambda: squeue_state(job) in (None, "COMPLETED"), 60, f"job {job} to end")
    ended = time.monotonic()
    await wait_for(lambda: dms_about(slack, job), 30, f"the DM about job {job}", interval=0.1)
    return time.monotonic() - ended


async def test_polls_and_dms_keep_going_across_wall_clock_steps(
    tmp_path: Path, clean_queue: None
) -> None:
    control = tmp_path / "faketime"
    set_clock(control, "+0")
    port = free_port()
    log = tmp_path / "bot.log"
    figures: list[str] = []
    async with SlackStandIn(users=linked_users()) as slack:
        with log.open("wb") as out:
            bot = start_bot(
                _config(tmp_path, port), slack, log=out, extra_env=faketime_env(control)
            )
        try:
            await slack.wait_for_socket_connection(timeout=30)

            async def polled_twice() -> bool:
                return (await _poll_counts(port))["slurm"] >= 2

            await wait_for(polled_twice, 30, "two Slurm polls")
            for step, spec in (("back 1 h", "-3600"), ("forward 1 h", "+0")):
                before = await _poll_counts(port)
                set_clock(control, spec)
                (tmp_path / "sacct.log").write_text("")
                stepped = time.monotonic()
                delay = await _dm_delay_after_job_end(slack)
                await asyncio.sleep(max(0.0, WATCH_SECONDS - (time.monotonic() - stepped)))
                watched = time.monotonic() - stepped
                after = await _poll_counts(port)
                text = await scrape(port)
                ready = await _readiness(port)
                polls = {s: after[s] - before[s] for s in after}
                figures.append(
                    f"{step}: {polls} polls in {watched:.1f} s, DM {delay:.1f} s after the job "
                    f"ended, ages {samples(text, 'skybot_snapshot_age_seconds')}"
                )
                # The old code ran none for the hour, and sent no DM in it.
                for source, count in polls.items():
                    assert count >= 3, (step, source, figures)
                assert delay <= 2 * POLL_SECONDS + 3, (step, figures)
                # In Slurm's time (this test's clock is not stepped): from just before now,
                # within the full look-back, never an hour away.
                starts = _sacct_starts(tmp_path)
                assert starts, (step, "no sacct after the step")
                earliest = time.time() - watched - OVERLAP_SECONDS - 60
                assert all(earliest <= start <= time.time() for start in starts), (step, starts)
                assert all(age >= 0 for age in samples(text, "skybot_snapshot_age_seconds"))
                checks = ready["checks"]
                assert isinstance(checks, dict)
                assert checks["pollers"]["ok"], checks
                assert checks["slurm"]["ok"], checks
                assert "-" not in checks["slurm"]["detail"], checks
        finally:
            bot.terminate()
            bot.wait(timeout=20)
    print("\n".join(figures))
    lines = log.read_text(errors="replace").splitlines()
    assert any("wall clock jumped back by 3600 s" in line for line in lines)
    assert any("wall clock jumped forward by 3600 s" in line for line in lines)
    assert not [line for line in lines if " ERROR " in line or line.startswith("Traceback")]
