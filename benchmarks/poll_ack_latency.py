"""Benchmark: `/sky gpus` ack latency while skybot polls a huge `squeue --json`.

`skybot run` (this checkout, HTTP mode, its own process) polls a synthetic cluster every
5 s: its `slurm.bin_dir` holds wrappers that print documents cloned from the recorded
fixtures (benchmarks/parse_and_store.py's generator: 100,000 jobs and 10,000 nodes by
default, in 24.x's data_parser v0.0.42 shape). Its squeue has no --only-job-state (as
before 24.05), so every poll reads and digests every record: the worst case for the
worker. Its squeue prints two documents in turn, 2% of the jobs in another state in the
second (--changed), so that every poll changes what the bot holds: its own share of a
poll (the writer's save, reloading what changed, the view) is done every time. A separate
process sends signed `/sky gpus hoffman-lab` back to back, one at a time, for 60 s, and
times each ack. The same is done with polling paused (the same configuration, whose next
poll is an hour away once the first one has loaded the snapshot), in the same run: the two
bots take turns, six stretches of 10 s each (--stretches), the polling one stopped (SIGSTOP)
while the paused one answers, so that both rows see the host as it was in the same minutes.
Slack's Web API is the stand-in (tests/support/slack_standin), in this process.

Targets (issue 17): no ack over 50 ms; p99 with polling within 1.5x of p99 paused.

--sources: the same cluster (24.11's shape, benchmarks/synthetic_sources.py) read both ways
in one run, two polling bots taking turns as above: one through Slurm's commands with
default settings (states-only polls, the pending-settings listing, `--jobs=` fetches), one
through slurmrestd (a local aiohttp server on 127.0.0.1 answering with v0.0.42's documents).
Targets (issue 39): no ack over 50 ms while either polls; the slurmrestd bot's peak RSS
(VmHWM of the bot's own process) within 1.2x of the CLI bot's; its poll's time per job
within 1.5x of the CLI's. Exits 1 when one is missed.

    python3 benchmarks/poll_ack_latency.py [--jobs 100000] [--nodes 10000] [--seconds 60]
        [--stretches 6] [--changed 0.02]
    python3 benchmarks/poll_ack_latency.py --quick      # 10,000 jobs, 20 s per row
    python3 benchmarks/poll_ack_latency.py --sources [--jobs 100000] [--changed 0.001]
    python3 benchmarks/poll_ack_latency.py --probe --logs DIR   # what the slow acks waited
        for: the bots run with benchmarks/pause_probe (a watchdog logging, with wall-clock
        times, when the bot's interpreter was held and by which thread), and each slow
        ack is printed with the reports made while it was out (all in DIR/bot-*.log)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import random
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from ack_latency import SECRET, TEAM, USER, http_sender  # noqa: E402
from parse_and_store import FIXTURES, synthetic_documents  # noqa: E402

from tests.support.bot_process import free_port, start_bot  # noqa: E402
from tests.support.slack_standin import SlackStandIn  # noqa: E402

SLOW_MS = 50.0


def write_slurm(bin_dir: Path, version: str, jobs: int, nodes: int, changed: float) -> float:
    """Wrappers printing the synthetic cluster; returns squeue --json's size in MB."""
    bin_dir.mkdir()
    documents = synthetic_documents(version, jobs, nodes)
    for name, text in documents.items():
        (bin_dir / f"{name}.json").write_text(text)
    squeue_mb = len(documents["squeue"]) / 1e6
    squeue_document = json.loads(documents.pop("squeue"))
    del documents
    rng = random.Random(17)
    for job in rng.sample(squeue_document["jobs"], int(len(squeue_document["jobs"]) * changed)):
        job["job_state"] = ["PENDING" if "RUNNING" in job["job_state"] else "RUNNING"]
    (bin_dir / "squeue-changed.json").write_text(json.dumps(squeue_document))
    del squeue_document
    (bin_dir / "sacctmgr.json").write_text(
        (FIXTURES / version / "sacctmgr_assoc.json").read_text()
        if (FIXTURES / version / "sacctmgr_assoc.json").is_file()
        else '{"associations": []}'
    )
    printing = {"sinfo": "sinfo", "sacct": "sacct", "sacctmgr": "sacctmgr"}
    for command, document in printing.items():
        _program(bin_dir, command, f"exec cat {shlex.quote(str(bin_dir / document))}.json")
    # As before 24.05: no --only-job-state, so every poll reads and digests every record,
    # the worst case for the bot's host (benchmarks/poll_changes.py measures the other).
    # One document, then the other: each poll finds 2% of the jobs changed.
    turn = shlex.quote(str(bin_dir / "squeue-turn"))
    squeue = shlex.quote(str(bin_dir / "squeue.json"))
    squeue_changed = shlex.quote(str(bin_dir / "squeue-changed.json"))
    _program(
        bin_dir,
        "squeue",
        'case "$*" in *--only-job-state*) '
        "echo \"squeue: unrecognized option '--only-job-state'\" >&2; exit 1;; esac\n"
        f"if [ -e {turn} ]; then rm {turn}; exec cat {squeue_changed}; fi\n"
        f"touch {turn}; exec cat {squeue}",
    )
    # `scontrol ping` while backing off; `scontrol show nodes --json` is never needed, since
    # the node document printed by sinfo lists nodes one by one.
    _program(bin_dir, "scontrol", 'echo "Slurmctld(primary) at bench is UP"')
    return squeue_mb


def _program(bin_dir: Path, command: str, body: str) -> None:
    script = bin_dir / command
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)


def write_config(folder: Path, bin_dir: Path, poll_seconds: float, http: int, metrics: int) -> Path:
    config = folder / f"skybot-{int(poll_seconds)}.toml"
    config.write_text(
        f'[slack]\nmode = "http"\nhttp_host = "127.0.0.1"\nhttp_port = {http}\n'
        f'[slurm]\nbin_dir = "{bin_dir}"\npoll_seconds = {poll_seconds}\n'
        # Polls as often as asked, however long they take: the harshest case for the acks.
        f"command_timeout_seconds = 120\nmax_poll_share = 1.0\n"
        f'[database]\npath = "{folder}/skybot-{int(poll_seconds)}.db"\n'
        f'[metrics]\nhost = "127.0.0.1"\nport = {metrics}\n'
        f'[identity]\nlinks = {{ "{TEAM}/{USER}" = "alice" }}\n'
        '[[labs]]\nname = "hoffman-lab"\npartition = "hoffman-lab"\naccount = "hoffman-lab"\n'
        '[[labs]]\nname = "kira-lab"\npartition = "kira-lab"\naccount = "kira-lab"\n'
    )
    return config


async def wait_ready(metrics_url: str, timeout: float) -> None:
    """Until the first poll is in the snapshot the bot answers from (/readyz: slurm ok)."""
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(f"{metrics_url}/readyz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.5)
    raise TimeoutError(f"skybot not ready after {timeout:.0f} s")


async def polls_done(metrics_url: str) -> float:
    """Slurm polls completed so far, from the bot's own metrics."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{metrics_url}/metrics") as response,
    ):
        text = await response.text()
    match = re.search(r'^skybot_poll_duration_seconds_count{source="slurm"} (\S+)$', text, re.M)
    return float(match.group(1)) if match else 0.0


@dataclass
class Bot:
    """One `skybot run` of the benchmark, its HTTP and metrics URLs and its logs."""

    name: str
    process: subprocess.Popen[bytes]
    events_url: str
    metrics_url: str
    log: Path
    load_log: Path
    sent: list[tuple[float, float]] = field(default_factory=list)


def start_benchmark_bot(
    name: str,
    slack: SlackStandIn,
    folder: Path,
    bin_dir: Path,
    poll_seconds: float,
    logs: Path,
    probe: bool,
) -> Bot:
    http, metrics = free_port(), free_port()
    config = write_config(folder, bin_dir, poll_seconds, http, metrics)
    return _launch(name, config, slack, (http, metrics), logs, str(int(poll_seconds)), probe)


def _launch(
    name: str,
    config: Path,
    slack: SlackStandIn,
    ports: tuple[int, int],
    logs: Path,
    log_suffix: str,
    probe: bool,
) -> Bot:
    """`skybot run` on `config` (its HTTP and metrics ports), logging to logs/bot-SUFFIX.log."""
    http, metrics = ports
    log = logs / f"bot-{log_suffix}.log"
    extra_env = {"PYTHONPATH": str(REPO / "benchmarks" / "pause_probe")} if probe else None
    with log.open("wb") as output:
        process = start_bot(config, slack, signing_secret=SECRET, log=output, extra_env=extra_env)
    return Bot(
        name,
        process,
        f"http://127.0.0.1:{http}/slack/events",
        f"http://127.0.0.1:{metrics}",
        log,
        logs / f"load-{log_suffix}.log",
    )


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (the poll worker, the Slurm commands it runs), parents
    first."""
    tree = [pid]
    for child in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            tree += [each for text in child.read_text().split() for each in process_tree(int(text))]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return tree


def signal_tree(pid: int, signum: signal.Signals) -> None:
    for each in process_tree(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(each, signum)


async def send_load(bot: Bot, seconds: float, probe: bool) -> None:
    """One stretch of back-to-back acks from a separate process, added to `bot.sent`."""
    extra_env = {"PYTHONPATH": str(REPO / "benchmarks" / "pause_probe")} if probe else {}
    # Probed too: an ack can also be slow because the load generator was held.
    with bot.load_log.open("ab") as load_log:
        load = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--load",
            bot.events_url,
            "--seconds",
            str(seconds),
            stdout=asyncio.subprocess.PIPE,
            stderr=load_log,
            env={**os.environ, **extra_env},
        )
        out, _ = await load.communicate()
    bot.sent += json.loads(out)


async def measure_rows(
    slack: SlackStandIn,
    folder: Path,
    bin_dir: Path,
    poll_seconds: float,
    seconds: float,
    stretches: int,
    logs: Path,
    probe: bool = False,
) -> dict[str, dict[str, float]]:
    """Both rows in one run, in alternating stretches of `seconds / stretches`: a paused bot
    (its next poll an hour away once its first is loaded) and a polling one. While the
    paused bot answers, the polling one is stopped (SIGSTOP, with its worker and commands),
    so nothing polls on the host; it resumes where it was for its own stretch. Measured one
    after the other, the two rows saw the host at different times: on this shared 2-core
    machine the paused p99 alone moved between 1.3 and 3.3 ms from run to run."""
    paused = start_benchmark_bot("polling paused", slack, folder, bin_dir, 3600, logs, probe)
    polling = start_benchmark_bot(
        f"polling every {poll_seconds:g} s", slack, folder, bin_dir, poll_seconds, logs, probe
    )
    bots = (paused, polling)
    try:
        for bot in bots:
            await wait_ready(bot.metrics_url, timeout=600)
        polls_before = await polls_done(polling.metrics_url)
        for _ in range(stretches):
            signal_tree(polling.process.pid, signal.SIGSTOP)
            await send_load(paused, seconds / stretches, probe)
            signal_tree(polling.process.pid, signal.SIGCONT)
            await send_load(polling, seconds / stretches, probe)
        polls_after = await polls_done(polling.metrics_url)
    finally:
        for bot in bots:
            signal_tree(bot.process.pid, signal.SIGCONT)
            bot.process.terminate()
            bot.process.wait(timeout=30)
    if probe:
        for bot in bots:
            print_slow_acks(bot)
    polls = polls_after - polls_before
    return {
        paused.name: {**summary([latency for _, latency in paused.sent]), "polls": 0.0},
        polling.name: {**summary([latency for _, latency in polling.sent]), "polls": polls},
    }


def print_slow_acks(bot: Bot) -> None:
    slow = [(at, latency) for at, latency in bot.sent if latency > SLOW_MS]
    print(f"{bot.name}: {len(slow)} acks over {SLOW_MS:.0f} ms")
    probed = [
        (at, f"{who}: {line}")
        for who, log in (("bot", bot.log), ("load generator", bot.load_log))
        for at, line in probe_lines(log.read_text(errors="replace"))
    ]
    for at, latency in slow:
        print(f"  sent at {at:.3f}, took {latency:.0f} ms; the probe meanwhile:")
        for line in during(probed, at, at + latency / 1000):
            print(f"    {line}")


def probe_lines(log: str) -> list[tuple[float, str]]:
    """(wall-clock time, first line) of each benchmarks/pause_probe report in a bot's log.
    The probe stamps a report when it is written: a stall ends then, and began its length
    before (a collection's or a late wake-up's, in the line)."""
    return [
        (float(match.group(1)), match.group(0))
        for match in re.finditer(r"^probe (\d+\.\d+) .*$", log, re.M)
    ]


def during(probed: list[tuple[float, str]], start: float, end: float) -> list[str]:
    """The reports stamped while an ack was out, or up to 0.2 s after (a stall that held
    it may end, and be written, after the ack went out); none at all means neither the bot
    nor the load generator was held (interpreter or host) as long as the probe reports."""
    lines = [line for at, line in probed if start <= at <= end + 0.2]
    return lines or ["(nothing: neither process was held 15 ms or more)"]


def summary(latencies_ms: list[float]) -> dict[str, float]:
    ordered = sorted(latencies_ms)

    def at(fraction: float) -> float:
        return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]

    return {
        "requests": len(ordered),
        "p50": statistics.median(ordered),
        "p99": at(0.99),
        "p999": at(0.999),
        "max": ordered[-1],
        "over_50ms": sum(v > SLOW_MS for v in ordered),
    }


async def load(url: str, seconds: float) -> list[tuple[float, float]]:
    """The load generator (its own process): one command after another for `seconds`;
    (wall-clock time sent, latency in ms) of each."""
    async with aiohttp.ClientSession() as session:
        send = http_sender(session, url, "gpus hoffman-lab")
        for _ in range(20):
            await send()  # warm-up
        latencies = []
        # No collections here while it measures: with --probe, a full collection of 48 ms
        # in this process (over the growing list of latencies) was the one ack over 50 ms
        # of a run, counted as the bot's. A minute's garbage fits in memory.
        gc.disable()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            sent_at = time.time()
            latencies.append((sent_at, await send() * 1000))
        gc.enable()
    return latencies


async def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="skybot-bench-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        squeue_mb = write_slurm(folder / "bin", args.version, args.jobs, args.nodes, args.changed)
        print(
            f"synthetic cluster: {args.jobs:,} jobs, {args.nodes:,} nodes ({args.version}), "
            f"squeue --json {squeue_mb:.0f} MB, {args.changed:.0%} of jobs changing per poll; "
            f"written in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        async with SlackStandIn() as slack:
            logs = Path(args.logs) if args.logs else folder
            logs.mkdir(parents=True, exist_ok=True)
            rows = await measure_rows(
                slack,
                folder,
                folder / "bin",
                args.poll_seconds,
                args.seconds,
                args.stretches,
                logs,
                args.probe,
            )
    print(
        f"/sky gpus hoffman-lab acks over HTTP, one at a time for {args.seconds:g} s per row "
        f"in {args.stretches} alternating stretches, from a separate process"
    )
    # Polls completed in the polling bot's stretches; one may span a paused stretch.
    header = ("requests", "p50 ms", "p99 ms", "p99.9 ms", "max ms", ">50 ms", "polls")
    print(f"{'':24}" + "".join(f"{h:>10}" for h in header))
    for name, row in rows.items():
        print(
            f"{name:24}{row['requests']:>10,.0f}{row['p50']:>10.2f}{row['p99']:>10.2f}"
            f"{row['p999']:>10.2f}{row['max']:>10.1f}{row['over_50ms']:>10,.0f}"
            f"{row['polls']:>10,.0f}"
        )
    polling, paused = rows[f"polling every {args.poll_seconds:g} s"], rows["polling paused"]
    print(
        f"polling: max ack {polling['max']:.1f} ms (target <= {SLOW_MS:.0f} ms); "
        f"p99 {polling['p99'] / paused['p99']:.2f}x paused (target <= 1.5x)"
    )
    return 0


async def run_sources(args: argparse.Namespace) -> int:
    """--sources: the CLI and slurmrestd side by side (see the module's docstring)."""
    from synthetic_sources import write_cluster, write_commands

    from tests.support.restd_tokens import make_token, write_token

    with tempfile.TemporaryDirectory(prefix="skybot-bench-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        sizes = write_cluster(folder / "cluster", args.jobs, args.nodes, args.changed)
        write_commands(folder / "cluster", folder / "bin", args.poll_seconds)
        print(
            f"synthetic 24.11 cluster: {args.jobs:,} jobs, {args.nodes:,} nodes, "
            + ", ".join(f"{name} {mb:.1f} MB" for name, mb in sizes.items())
            + f"; {args.changed:.1%} of jobs changing state every {args.poll_seconds:g} s; "
            f"written in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        port = free_port()
        restd = subprocess.Popen(
            [sys.executable, str(REPO / "benchmarks" / "synthetic_sources.py"),
             str(folder / "cluster"), str(port), str(args.poll_seconds)]
        )  # fmt: skip
        write_token(folder / "bench.jwt", make_token("skybot", time.time() + 86_400))
        restd_table = (
            f'source = "slurmrestd"\nurl = "http://127.0.0.1:{port}"\n'
            f'token_file = "{folder}/bench.jwt"\n'
        )
        logs = Path(args.logs) if args.logs else folder
        logs.mkdir(parents=True, exist_ok=True)
        try:
            async with SlackStandIn() as slack:
                bots = [
                    _source_bot("cli", 'source = "cli"\n', slack, folder, args, logs),
                    _source_bot("slurmrestd", restd_table, slack, folder, args, logs),
                ]
                rows = await measure_sources(bots, args)
        finally:
            restd.terminate()
            restd.wait(timeout=30)
    return print_sources(rows, args)


def _source_bot(
    name: str,
    source_table: str,
    slack: SlackStandIn,
    folder: Path,
    args: argparse.Namespace,
    logs: Path,
) -> Bot:
    http, metrics = free_port(), free_port()
    config = folder / f"skybot-{name}.toml"
    config.write_text(
        f'[slack]\nmode = "http"\nhttp_host = "127.0.0.1"\nhttp_port = {http}\n'
        f'[database]\npath = "{folder}/skybot-{name}.db"\n'
        f'[metrics]\nhost = "127.0.0.1"\nport = {metrics}\n'
        f'[identity]\nlinks = {{ "{TEAM}/{USER}" = "alice" }}\n'
        f'[[clusters]]\nname = "bench"\n{source_table}'
        f'[clusters.slurm]\nbin_dir = "{folder}/bin"\npoll_seconds = {args.poll_seconds}\n'
        # Polls as often as asked, however long they take: the harshest case for the acks.
        "command_timeout_seconds = 120\nmax_poll_share = 1.0\n"
        '[[clusters.labs]]\nname = "hoffman-lab"\npartition = "hoffman-lab"\n'
        'account = "hoffman-lab"\n'
        '[[clusters.labs]]\nname = "kira-lab"\npartition = "kira-lab"\naccount = "kira-lab"\n'
    )
    return _launch(name, config, slack, (http, metrics), logs, name, args.probe)


async def poll_seconds_spent(metrics_url: str) -> tuple[float, float]:
    """(polls completed, seconds they took) so far, from the bot's own metrics."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{metrics_url}/metrics") as response,
    ):
        text = await response.text()
    found = {
        kind: float(value)
        for kind, value in re.findall(
            r'^skybot_poll_duration_seconds_(sum|count){[^}]*source="slurm"[^}]*} (\S+)$',
            text,
            re.M,
        )
    }
    return found.get("count", 0.0), found.get("sum", 0.0)


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM), in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)
    return int(match.group(1)) / 1024 if match else 0.0


async def timed_polls(bot: Bot, polls: int) -> tuple[float, float]:
    """(polls, seconds they took) of the next `polls` polls that start now: the poll in
    flight is let finish first (it may have begun while the bot was stopped, which its
    duration would count)."""

    async def after(count: float) -> tuple[float, float]:
        while (now := await poll_seconds_spent(bot.metrics_url))[0] < count:
            await asyncio.sleep(0.2)
        return now

    start = await after((await poll_seconds_spent(bot.metrics_url))[0] + 1)
    end = await after(start[0] + polls)
    return end[0] - start[0], end[1] - start[1]


async def measure_sources(bots: list[Bot], args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Each bot answers acks in its own stretches while the other is stopped (SIGSTOP, with
    its worker and commands), so that both see the host as it was in the same minutes."""
    try:
        for bot in bots:
            await wait_ready(bot.metrics_url, timeout=1800)
        for _ in range(args.stretches):
            for bot in bots:
                others = [other for other in bots if other is not bot]
                for other in others:
                    signal_tree(other.process.pid, signal.SIGSTOP)
                await send_load(bot, args.seconds / args.stretches, args.probe)
                for other in others:
                    signal_tree(other.process.pid, signal.SIGCONT)
        rows = {}
        for bot in bots:
            others = [other for other in bots if other is not bot]
            for other in others:
                signal_tree(other.process.pid, signal.SIGSTOP)
            polls, seconds = await timed_polls(bot, args.timed_polls)
            for other in others:
                signal_tree(other.process.pid, signal.SIGCONT)
            rows[bot.name] = {
                **summary([latency for _, latency in bot.sent]),
                "polls": polls,
                "s_per_poll": seconds / polls,
                "ms_per_1000_jobs": 1e6 * seconds / polls / args.jobs,
                "peak_rss_mb": peak_rss_mb(bot.process.pid),
            }
    finally:
        for bot in bots:
            signal_tree(bot.process.pid, signal.SIGCONT)
            bot.process.terminate()
            bot.process.wait(timeout=60)
    if args.probe:
        for bot in bots:
            print_slow_acks(bot)
    return rows


def print_sources(rows: dict[str, dict[str, float]], args: argparse.Namespace) -> int:
    print(
        f"/sky gpus hoffman-lab acks over HTTP, one at a time for {args.seconds:g} s per bot "
        f"in {args.stretches} alternating stretches, from a separate process; both bots poll "
        f"every {args.poll_seconds:g} s (max_poll_share 1.0); poll times: {args.timed_polls} "
        "polls of each bot alone, after its stretches; RSS: the bot process's peak (VmHWM)"
    )
    header = ("requests", "p50 ms", "p99 ms", "max ms", ">50 ms", "s/poll", "ms/1k jobs", "RSS MB")
    print(f"{'':12}" + "".join(f"{h:>11}" for h in header))
    for name, row in rows.items():
        print(
            f"{name:12}{row['requests']:>11,.0f}{row['p50']:>11.2f}{row['p99']:>11.2f}"
            f"{row['max']:>11.1f}{row['over_50ms']:>11,.0f}{row['s_per_poll']:>11.2f}"
            f"{row['ms_per_1000_jobs']:>11.2f}{row['peak_rss_mb']:>11.0f}"
        )
    cli, restd = rows["cli"], rows["slurmrestd"]
    rss = restd["peak_rss_mb"] / cli["peak_rss_mb"]
    per_job = restd["ms_per_1000_jobs"] / cli["ms_per_1000_jobs"]
    worst = max(cli["max"], restd["max"])
    missed = [
        f"an ack took {worst:.1f} ms (target <= {SLOW_MS:.0f} ms)" for _ in [0] if worst > SLOW_MS
    ]
    if not rss <= 1.2:
        missed.append(f"slurmrestd's peak RSS is {rss:.2f}x the CLI's (target <= 1.2x)")
    if not per_job <= 1.5:
        missed.append(
            f"slurmrestd's poll time per job is {per_job:.2f}x the CLI's (target <= 1.5x)"
        )
    print(
        f"max ack {worst:.1f} ms (target <= {SLOW_MS:.0f}); slurmrestd/CLI: peak RSS "
        f"{rss:.2f}x (target <= 1.2x), poll time per job {per_job:.2f}x (target <= 1.5x)"
    )
    for miss in missed:
        print(f"MISSED: {miss}")
    return 1 if missed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--stretches", type=int, default=6, help="alternating stretches per row (of each)"
    )
    parser.add_argument("--poll-seconds", type=float, default=5.0)
    parser.add_argument("--changed", type=float, default=0.02, help="jobs changing per poll")
    parser.add_argument("--version", default="v0.0.42", choices=("v0.0.38", "v0.0.42"))
    parser.add_argument("--quick", action="store_true", help="10,000 jobs, 20 s per row")
    parser.add_argument("--logs", help="keep the bots' logs in this directory")
    parser.add_argument("--probe", action="store_true", help="log what the slow acks waited for")
    parser.add_argument(
        "--sources", action="store_true", help="the CLI and slurmrestd side by side (issue 39)"
    )
    parser.add_argument(
        "--timed-polls", type=int, default=20, help="--sources: polls timed per bot"
    )
    parser.add_argument("--load", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        print(json.dumps(asyncio.run(load(args.load, args.seconds))))
        return 0
    if args.quick:
        args.jobs, args.nodes, args.seconds = 10_000, 1_000, 20.0
    if args.sources:
        return asyncio.run(run_sources(args))
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
