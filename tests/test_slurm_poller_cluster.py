"""The Slurm poller against the real test cluster: what lands in the store, and at what cost."""

from __future__ import annotations

import logging
import re
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from msgspec.structs import replace

from core.config_schema import NotificationsConfig
from core.job_notices import Seen, compose_job_notice
from core.notice_cluster import NoticeCluster
from core.slurm_decode import decode_slurm_json
from core.slurm_json import parse_squeue
from core.transitions import Transition
from core.view import ClusterView
from handlers.commands import command_table
from tests.support.asking import answer_from_view
from tests.support.cluster import (
    cluster_script,
    reach_time_limit,
    sbatch,
    squeue_json,
    squeue_state,
    wait_for,
    wait_until,
)
from tests.support.poller_harness import Harness, _config, running
from tests.support.slurm_wrappers import COMMANDS, as_user, write_wrappers

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
async def harness(tmp_path: Path, clean_queue: None) -> AsyncIterator[Harness]:
    h = Harness(_config(tmp_path))
    yield h
    h.close()


async def test_jobs_land_with_lab_user_gpu_type_and_count(harness: Harness) -> None:
    per_node = sbatch(
        "alice",
        "-p",
        "hoffman-lab",
        "-A",
        "hoffman-lab",
        "-w",
        "clippy",
        "--gpus-per-node=a40:2",
        "--wrap",
        "sleep 300",
    )
    per_job = sbatch(
        "bob",
        "-p",
        "hoffman-lab",
        "-A",
        "hoffman-lab",
        "-w",
        "xaea-12",
        "--gpus=1",
        "--wrap",
        "sleep 300",
    )
    by_gres = sbatch(
        "carol", "-p", "kira-lab", "-A", "kira-lab", "--gres=gpu:rtx_6000:3", "--wrap", "sleep 300"
    )

    async def all_running() -> ClusterView | None:
        view = await harness.poll()
        jobs = [view.jobs_by_id.get(i) for i in (per_node, per_job, by_gres)]
        # squeue and sinfo are two RPCs: a poll right after the jobs start can list them
        # running and their nodes still idle. The next poll has both.
        gpus_in_use = sum(sum(node.gpus_used.values()) for node in view.snapshot.nodes)
        running = all(j and j.state == "RUNNING" for j in jobs)
        return view if running and gpus_in_use == 6 else None

    view = await wait_for(all_running, 60, "the three GPU jobs to run with 6 GPUs on their nodes")

    a, b, c = (view.jobs_by_id[i] for i in (per_node, per_job, by_gres))
    assert (a.user, a.account, a.partition, a.gpus_by_type) == (
        "alice",
        "hoffman-lab",
        "hoffman-lab",
        {"a40": 2},
    )
    # --gpus=1 leaves squeue's %b empty; the allocation still says what it got.
    assert (b.user, b.gpus_by_type, b.nodes) == ("bob", {"rtx_6000": 1}, "xaea-12")
    assert (c.user, c.account, c.gpus_by_type) == ("carol", "kira-lab", {"rtx_6000": 3})

    hoffman = view.usage(view.lab("hoffman-lab"))
    assert (hoffman.gpus_used, hoffman.cap) == (3, 4)
    assert hoffman.by_user == {"alice": 2, "bob": 1}
    assert hoffman.by_type == {"a40": 2, "rtx_6000": 1}
    nodes = {n.name: n for n in view.snapshot.nodes}
    assert nodes["clippy"].gpus_used == {"a40": 2}
    assert view.idle_by_type == {"2080_ti": 4, "a40": 2}


async def test_lab_at_cap_shows_used_equals_cap_and_the_waiting_job(harness: Harness) -> None:
    running = sbatch(
        "alice",
        "-p",
        "hoffman-lab",
        "-A",
        "hoffman-lab",
        "--gpus-per-node=a40:4",
        "--wrap",
        "sleep 300",
    )
    # bob's once alice's runs: under fair-share his may outrank hers, start first and leave
    # her 4 GPUs over the lab's cap.
    await wait_for(lambda: squeue_state(running) == "RUNNING", 30, "alice's job to run")
    waiting = sbatch(
        "bob", "-p", "hoffman-lab", "-A", "hoffman-lab", "--gpus=1", "--wrap", "sleep 300"
    )

    async def at_cap() -> ClusterView | None:
        view = await harness.poll()
        job = view.jobs_by_id.get(waiting)
        usage = view.usage(view.lab("hoffman-lab"))
        return view if job and job.reason == "AssocGrpGRES" and usage.gpus_used == 4 else None

    view = await wait_for(at_cap, 60, "hoffman-lab to show as at its cap")
    usage = view.usage(view.lab("hoffman-lab"))
    assert usage.at_cap and usage.gpus_used == usage.cap == 4
    assert [(j.job_id, j.user, j.reason) for j in usage.pending_at_cap] == [
        (waiting, "bob", "AssocGrpGRES")
    ]


async def test_final_states_are_recorded_even_after_jobs_left_squeue(harness: Harness) -> None:
    await harness.poll()  # the baseline: the poller has seen the empty queue
    timeout_job = sbatch(
        "bob", "-p", "debug", "-A", "hoffman-lab", "--time=1", "--wrap", "sleep 300"
    )
    completed = sbatch("dave", "-p", "kira-lab", "-A", "kira-lab", "--wrap", "true")
    failed = sbatch("carol", "-p", "kira-lab", "-A", "kira-lab", "--wrap", "exit 3")
    cancelled = sbatch("alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "--wrap", "sleep 300")
    wait_until(lambda: squeue_state(cancelled) == "RUNNING", 30, "the job to cancel to run")
    subprocess.run(["scancel", str(cancelled)], check=True, timeout=30)
    wait_until(lambda: squeue_state(timeout_job) == "RUNNING", 30, "the job to time out to run")
    reach_time_limit(timeout_job)

    # No polling while these end: they must also leave squeue (MinJobAge=10) before the
    # next poll, so only sacct can tell the poller how they ended.
    ended = (timeout_job, completed, failed, cancelled)
    wait_until(
        lambda: all(squeue_state(j) is None for j in ended),
        150,
        "the finished jobs to leave squeue",
    )

    async def every_final() -> dict[int, tuple[str, object]] | None:
        await harness.poll()
        finals = {
            job_id: (state, job)
            for job_id, state, _, job in await harness.transitions()
            if job_id in ended and state != "RUNNING" and state != "PENDING"
        }
        return finals if len(finals) == len(ended) else None

    # slurmdbd lags the controller by a few seconds
    finals = await wait_for(every_final, 40, "every final state from sacct", 1)
    assert {j: s for j, (s, _) in finals.items()} == {
        timeout_job: "TIMEOUT",
        completed: "COMPLETED",
        failed: "FAILED",
        cancelled: "CANCELLED",
    }
    # Each final state is recorded once, however many polls see it again.
    await harness.poll()
    states = [(j, s) for j, s, _, _ in await harness.transitions() if j in ended]
    assert len(states) == len(set(states))


async def test_a_job_cancelled_while_pending_is_told_it_never_started(harness: Harness) -> None:
    waiting = sbatch("alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "--hold", "--wrap", "true")
    assert (await harness.poll()).jobs_by_id[waiting].state == "PENDING"
    subprocess.run(["scancel", str(waiting)], check=True, timeout=30)

    (record,) = await harness.recorded(waiting, "CANCELLED", 20)
    # Slurm's record: start = end = when it was cancelled; no runtime to tell.
    notice = compose_job_notice(
        Transition(record, "PENDING", "CANCELLED", 0),
        "CANCELLED",
        Seen(time.time()),
        NotificationsConfig(),
        NoticeCluster("skynet"),
    )
    assert "was cancelled before it started." in notice.text, (record, notice.text)
    assert "Runtime: it never started" in notice.text


async def test_a_failure_seen_live_keeps_its_exit_code(harness: Harness) -> None:
    """Polled every half second while it runs, as the bot polls: the end is recorded once,
    with the script's exit code. Whether a poll still finds the ended job in squeue is
    Slurm's to say (22.05 lists it for MinJobAge; 24.11's squeue had dropped it by the
    next poll 0.5 s later), so the recorded transition is what is checked, not the view."""
    failed = sbatch("carol", "-p", "kira-lab", "-A", "kira-lab", "--wrap", "sleep 2; exit 3")
    await running(harness, failed)

    finals = await harness.recorded(failed, "FAILED", 40)
    assert len(finals) == 1
    assert finals[0].exit_code == 3


async def test_preemption_is_recorded_as_a_requeue_with_its_restart_count(
    harness: Harness,
) -> None:
    overcap = sbatch(
        "dave",
        "-p",
        "overcap",
        "-A",
        "overcap",
        "-w",
        "baymax",
        "--gpus-per-node=4",
        "--wrap",
        "sleep 300",
    )
    await running(harness, overcap)
    sbatch(
        "carol",
        "-p",
        "kira-lab",
        "-A",
        "kira-lab",
        "-w",
        "baymax",
        "--gpus-per-node=2080_ti:2",
        "--wrap",
        "sleep 300",
    )

    async def requeued() -> list[tuple[str, int]]:
        await harness.poll()
        transitions = await harness.transitions()
        return [(s, r) for j, s, r, _ in transitions if j == overcap and s == "REQUEUED"]

    requeues = await wait_for(requeued, 40, f"job {overcap}'s requeue recorded")
    assert requeues == [("REQUEUED", 1)]
    view = await harness.poll()
    job = view.jobs_by_id[overcap]
    assert (job.state, job.restarts, job.reason) == ("PENDING", 1, "BeginTime")


async def test_slurmctld_outage_keeps_the_snapshot_backs_off_and_recovers(
    harness: Harness,
) -> None:
    running = sbatch("alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "--wrap", "sleep 300")
    wait_until(lambda: squeue_state(running) == "RUNNING", 30, "the job to run")
    view = await harness.poll()
    assert running in view.jobs_by_id
    # By the cluster script, not by name: the host also sees the 24.11 sandbox's slurmctld.
    cluster_script("stop-controller")
    try:
        for _ in range(20):  # until the back-off has grown past one poll interval
            harness.now += 1
            assert await harness.poller.poll_jobs() is False
            if harness.poller.consecutive_failures >= 3:
                break
        view = await harness.cache.refresh()
        status = view.snapshot.source("slurm")
        assert status.failing
        # squeue and the nodes (sinfo; scontrol on 23.02+) run at once: either may fail first.
        assert (status.error or "").startswith(("squeue ", "sinfo ", "scontrol ")), status.error
        assert running in view.jobs_by_id, "the last good snapshot must stay"
        # Backing off: a poll inside the wait asks `scontrol ping` only, not the full poll.
        failures = harness.poller.consecutive_failures
        assert await harness.poller.poll_jobs() is False
        assert harness.poller.consecutive_failures == failures
    finally:
        cluster_script("up")
    # Still inside the back-off's wait (the clock has not moved), yet the first poll after
    # the controller answers again brings the snapshot up to date.
    assert await harness.poller.poll_jobs() is True
    view = await harness.cache.refresh()
    assert not view.snapshot.source("slurm").failing
    assert view.jobs_by_id[running].state == "RUNNING"


async def test_slurmdbd_outage_leaves_the_live_snapshot_current(harness: Harness) -> None:
    first = sbatch("alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "--wrap", "sleep 300")
    wait_until(lambda: squeue_state(first) == "RUNNING", 30, "the first job to run")
    await harness.poll()
    cluster_script("stop-accounting")
    try:
        second = sbatch("carol", "-p", "kira-lab", "-A", "kira-lab", "--wrap", "sleep 300")
        wait_until(lambda: squeue_state(second) == "RUNNING", 30, "the second job to run")
        harness.now += 1
        assert await harness.poller.poll_jobs() is True
        view = await harness.cache.refresh()
        assert view.jobs_by_id[second].state == "RUNNING", "squeue is current without sacct"
        assert not view.snapshot.source("slurm").failing
        assert view.snapshot.source("accounting").failing
    finally:
        cluster_script("up")
    harness.now += 1
    assert await harness.poller.poll_jobs() is True
    view = await harness.cache.refresh()
    assert not view.snapshot.source("accounting").failing


async def test_controller_budget_is_constant_per_poll_cycle(tmp_path: Path) -> None:
    """The poller's slurmctld RPCs per cycle, measured by sdiag under its own account."""
    # The real commands as the `skybot` service user, so sdiag counts them apart.
    wrappers = write_wrappers(tmp_path / "bin", {c: as_user("skybot", c) for c in COMMANDS})
    h = Harness(_config(tmp_path, bin_dir=str(wrappers)))
    try:
        await h.poll()  # warm-up (first sacct window, caps)
        before = _sdiag_rpcs_of("skybot")
        cycles = 5
        for _ in range(cycles):
            h.now += 15
            assert await h.poller.poll_jobs()
            # However many commands are answered meanwhile, they read the snapshot only.
            view = await h.cache.refresh()
            for _ in range(200):
                view.usage(view.lab("hoffman-lab"))
        after = _sdiag_rpcs_of("skybot")
    finally:
        h.close()
    per_cycle = (after - before) / cycles
    print(f"slurmctld RPCs per poll cycle: {per_cycle:g}")
    # squeue's and the nodes' reads, and sdiag's REQUEST_STATS_INFO (counters only, no job
    # read: whether slurmctld has sent slurmdbd every job end, for sacct's window).
    assert per_cycle <= 4


def _sdiag_rpcs_of(user: str) -> int:
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    by_user = out.split("Remote Procedure Call statistics by user", 1)[1]
    match = re.search(rf"^\s*{user}\s+\(\s*\d+\)\s+count:(\d+)", by_user, re.MULTILINE)
    return int(match.group(1)) if match else 0


async def test_a_quiet_poll_logs_no_warning(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # Nothing ended in the window: sacct answers "Nothing found" (error 9003), every poll.
    caplog.set_level(logging.INFO)
    for _ in range(2):
        harness.now += 1
        assert await harness.poller.poll_jobs() is True
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == []


# The 24.11 cluster's second a40 node (deploy/testcluster-24.11.sh): 2 GPUs beside clippy's 4,
# in the same partitions. Held drained between tests, so the others see 22.05's idle GPUs.
SPARE_NODE = "olaf"


@pytest.fixture
def spare_node_resumed(clean_queue: None) -> Iterator[None]:
    shown = subprocess.run(["scontrol", "show", "node", SPARE_NODE], capture_output=True)
    if shown.returncode != 0:
        pytest.skip(f"only the 24.11 cluster has a second a40 node ({SPARE_NODE})")
    subprocess.run(
        ["scontrol", "update", f"nodename={SPARE_NODE}", "state=resume"], check=True, timeout=30
    )
    try:
        yield
    finally:
        subprocess.run(["scancel", "-w", SPARE_NODE], check=True, timeout=30)
        cluster_script("up")  # drains the spare node again


async def test_free_counts_each_node_of_one_gpu_type_by_its_own_total(
    harness: Harness, spare_node_resumed: None
) -> None:
    """clippy (4 a40) and olaf (2 a40) in one partition, one GPU taken on each: 3 and 1 idle."""
    on_clippy = sbatch(
        "alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "-w", "clippy",
        "--gpus-per-node=a40:1", "--wrap", "sleep 300",
    )  # fmt: skip
    on_olaf = sbatch(
        "bob", "-p", "hoffman-lab", "-A", "hoffman-lab", "-w", SPARE_NODE,
        "--gpus-per-node=a40:1", "--wrap", "sleep 300",
    )  # fmt: skip

    async def both_running() -> ClusterView | None:
        view = await harness.poll()
        jobs = [view.jobs_by_id.get(i) for i in (on_clippy, on_olaf)]
        # As above: the nodes may still show idle in the poll that first lists them running.
        gpus_in_use = sum(sum(node.gpus_used.values()) for node in view.snapshot.nodes)
        return view if all(j and j.state == "RUNNING" for j in jobs) and gpus_in_use == 2 else None

    view = await wait_for(both_running, 60, "a GPU job to run on clippy and on olaf")
    assert view.jobs_by_id[on_olaf].nodes == SPARE_NODE
    nodes = {n.name: n for n in view.snapshot.nodes}
    assert nodes["clippy"].partitions == nodes[SPARE_NODE].partitions
    per_node = {
        name: (nodes[name].gpus_total, nodes[name].gpus_used, nodes[name].gpus_idle)
        for name in ("clippy", SPARE_NODE)
    }
    assert per_node == {
        "clippy": ({"a40": 4}, {"a40": 1}, {"a40": 3}),
        SPARE_NODE: ({"a40": 2}, {"a40": 1}, {"a40": 1}),
    }
    assert view.idle_by_type == {"2080_ti": 4, "a40": 4, "rtx_6000": 4}
    free = answer_from_view(
        command_table(), view, "free a40", team_id="T1", user_id="U1", cluster_user="alice"
    ).text
    assert "*`a40`*: 4 idle" in free
    assert "`clippy`: 3 — partitions: `hoffman-lab" in free
    assert f"`{SPARE_NODE}`: 1 — partitions: `hoffman-lab" in free


# 24.05+: a poll lists every job's id and state, then fetches the few new or changed jobs
# one id at a time (`squeue --json --jobs=ID`: slurmctld reads that job alone).


def _needs_only_job_state() -> None:
    listing = subprocess.run(
        ["squeue", "--all", "--only-job-state", "--json"], capture_output=True, timeout=30
    )
    if listing.returncode != 0:
        pytest.skip("this squeue has no --only-job-state (22.05): every poll reads every job")


def _logging_squeue(tmp_path: Path, before: str = "") -> tuple[Path, Path]:
    """A bin_dir whose squeue runs `before` (shell), then logs its arguments and runs the real
    one; the other commands are the real ones. Returns (bin_dir, log)."""
    log = tmp_path / "squeue.log"
    log.touch()
    bodies = {c: f'exec /usr/bin/{c} "$@"' for c in COMMANDS}
    bodies["squeue"] = f'{before}\necho "$*" >> {log}\nexec /usr/bin/squeue "$@"'
    return write_wrappers(tmp_path / "bin", bodies), log


def _fetched(log: Path) -> list[str]:
    """The `--jobs=` values squeue was asked for since the last call."""
    calls = log.read_text().split()
    log.write_text("")
    return [a.removeprefix("--jobs=") for a in calls if a.startswith("--jobs=")]


async def test_a_job_changing_state_is_fetched_by_its_own_id(
    tmp_path: Path, clean_queue: None
) -> None:
    _needs_only_job_state()
    bin_dir, log = _logging_squeue(tmp_path)
    h = Harness(_config(tmp_path, bin_dir=str(bin_dir)))
    try:
        hoffman = ("-p", "hoffman-lab", "-A", "hoffman-lab", "--hold", "--wrap", "sleep 300")
        released = sbatch("alice", *hoffman)
        still_held = sbatch("bob", *hoffman)
        array = sbatch(
            "carol", "-p", "kira-lab", "-A", "kira-lab", "--hold", "--array=0-2",
            "--wrap", "sleep 300",
        )  # fmt: skip
        await h.poll()  # the first poll reads every record in one squeue
        _fetched(log)
        await h.poll()
        # Nothing changed, nothing fetched: the held array's pending record included, which
        # 24.11 lists once per task (ARRAY_0, ARRAY_1, ARRAY_2).
        assert _fetched(log) == []

        subprocess.run(["scontrol", "release", str(released)], check=True, timeout=30)
        wait_until(lambda: squeue_state(released) == "RUNNING", 30, "the released job to run")
        view = await h.poll()
        fetched = _fetched(log)
        assert str(released) in fetched and str(still_held) not in fetched
        assert all("," not in ids for ids in fetched), f"a list was fetched: {fetched}"
        assert view.jobs_by_id[released].state == "RUNNING"
        assert view.jobs_by_id[still_held].state == "PENDING"
        assert (released, "RUNNING") in {(j, s) for j, s, _, _ in await h.transitions()}

        # An array's tasks start: each fetched by one id, its records those a full read lists.
        subprocess.run(["scontrol", "release", str(array)], check=True, timeout=30)

        def tasks_running() -> set[int] | None:
            jobs = squeue_json()["jobs"]
            tasks = {j["job_id"] for j in jobs if j["array_job_id"]["number"] == array}
            states = {j["job_state"] for j in jobs if j["job_id"] in tasks}
            return tasks if len(tasks) == 3 and states == {"RUNNING"} else None

        tasks = wait_until(tasks_running, 30, "the array's three tasks to run")
        view = await h.poll()
        fetched = _fetched(log)
        assert fetched and all("," not in ids for ids in fetched), fetched
        full = parse_squeue(
            decode_slurm_json(subprocess.check_output(["squeue", "--all", "--json"]))
        )
        expected = {j.job_id: j for j in full.records if j.job_id in tasks}
        assert {i: view.jobs_by_id[i] for i in tasks} == expected
        # Running, the tasks are listed under their own job ids: matched, not fetched again.
        await h.poll()
        assert _fetched(log) == []
    finally:
        h.close()


async def test_a_job_gone_before_its_own_fetch_does_not_fail_the_poll(
    tmp_path: Path, clean_queue: None
) -> None:
    """The states listing shows the job running; before its fetch it is cancelled and purged
    (MinJobAge), so 24.11's squeue answers its id with exit 1, "Invalid job id specified".
    That is a job no longer listed, not an outage; sacct still tells how it ended."""
    _needs_only_job_state()
    vanish = tmp_path / "vanish"
    between = f"""case " $* " in *" --only-job-state "*)
  listing=$(/usr/bin/squeue "$@") || exit $?
  if [ -e {vanish} ]; then
    job=$(cat {vanish}); rm {vanish}
    /usr/bin/scancel "$job"
    tries=0
    while /usr/bin/squeue --jobs="$job" >/dev/null 2>&1 && [ $tries -lt 300 ]; do
      sleep 0.5; tries=$((tries + 1))
    done
  fi
  printf '%s\\n' "$listing"; exit 0;;
esac"""
    bin_dir, log = _logging_squeue(tmp_path, before=between)
    config = _config(tmp_path, bin_dir=str(bin_dir))
    # The listing waits for the purge: up to MinJobAge and slurmctld's purge cycle.
    config = replace(config, slurm=replace(config.slurm, command_timeout_seconds=200))
    h = Harness(config)
    try:
        job = sbatch(
            "alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "--hold", "--wrap", "sleep 300"
        )
        await h.poll()
        await h.poll()
        subprocess.run(["scontrol", "release", str(job)], check=True, timeout=30)
        wait_until(lambda: squeue_state(job) == "RUNNING", 30, "the job to run")
        _fetched(log)
        vanish.write_text(str(job))
        h.now = max(h.now, time.time())
        assert await h.poller.poll_jobs() is True
        assert not vanish.exists(), "the listing did not see the job go"
        assert _fetched(log) == [str(job)]
        gone = subprocess.run(["squeue", "--json", f"--jobs={job}"], capture_output=True)
        assert (gone.returncode, b"Invalid job id specified") == (1, gone.stderr.strip()[-24:])
        view = await h.cache.refresh()
        assert not view.snapshot.source("slurm").failing
        assert job not in view.jobs_by_id

        async def recorded() -> bool:  # slurmdbd lags the controller by a few seconds
            await h.poll()
            return (job, "CANCELLED") in {(j, s) for j, s, _, _ in await h.transitions()}

        await wait_for(recorded, 40, "the vanished job's end recorded from sacct", 1)
    finally:
        h.close()
