"""How far back each poll's sacct looks (issue 26, item 11).

After a mass end (20,000 held jobs cancelled on 24.11), every poll for five minutes re-read
all of them, 85 MB each, because sacct's window always started `sacct_overlap_seconds`
(300 s) before the last poll, in case slurmdbd recorded an end late. slurmctld sends each
end to slurmdbd through a queue, in order, and sdiag shows its length: once it is seen empty
at some time and a later sacct has answered, every end before then has been read, and later
windows start just before that time instead. sdiag runs beside the poll's other commands, so
the sacct later than it is the next poll's.

No cluster: slurm.bin_dir holds stand-ins that print the 22.05 recordings, an sdiag that
prints the queue length a test sets, and a sacct that logs its arguments.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from msgspec.structs import replace

from bot.config import Config, DatabaseConfig, SlurmConfig, load_config
from core.controller_diag import ControllerDiag, diag_from_restd, diag_from_sdiag
from scheduler.slurm.cli_source import _slurm_time
from scheduler.slurm.poller import SlurmPoller
from scheduler.slurm.sacct_window import SACCT_CAUGHT_UP_MARGIN_SECONDS
from store.writer import StoreWriter

V38 = Path(__file__).parent / "fixtures" / "slurm" / "v0.0.38"
OVERLAP = SlurmConfig().sacct_overlap_seconds
START = 1_764_000_000.0  # the first poll: also the new store's history start


class Clock:
    """This host's wall clock (`now`), which a test may step, and its monotonic clock."""

    def __init__(self) -> None:
        self.now = START
        self.since_start = 0.0

    def __call__(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.since_start


def _program(bin_dir: Path, command: str, body: str) -> None:
    log = shlex.quote(str(bin_dir / "calls.log"))
    script = bin_dir / command
    script.write_text(f'#!/bin/sh\necho "{command} $*" >> {log}\n{body}\n')
    script.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for command, document in (("squeue", "squeue.json"), ("sinfo", "sinfo.json")):
        _program(bin_dir, command, f"exec cat {shlex.quote(str(V38 / document))}")
    _program(bin_dir, "scontrol", "echo \"scontrol: unrecognized option '--json'\" >&2; exit 1")
    fails = shlex.quote(str(bin_dir / "sacct.fails"))
    _program(
        bin_dir,
        "sacct",
        f"if [ -e {fails} ]; then echo 'sacct: error: slurmdbd down' >&2; exit 1; fi\n"
        f"exec cat {shlex.quote(str(V38 / 'sacct.json'))}",
    )
    queue = shlex.quote(str(bin_dir / "queue"))
    slurm_time = shlex.quote(str(bin_dir / "slurm_time"))
    _program(
        bin_dir,
        "sdiag",
        f'echo "sdiag output at Mon Dec 07 20:28:35 2026 ($(cat {slurm_time}))"\n'
        "echo 'Server thread count:  3'\n"
        "echo 'Agent queue size:     0'\n"
        f'echo "DBD Agent queue size: $(cat {queue})"\n'
        "echo; echo 'Jobs submitted: 181'",
    )
    (bin_dir / "queue").write_text("0")
    return bin_dir


def _config(tmp_path: Path, bin_dir: Path) -> Config:
    return replace(
        load_config(None),
        slurm=SlurmConfig(bin_dir=str(bin_dir), command_timeout_seconds=10),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
    )


def _windows(bin_dir: Path) -> list[str]:
    """Each sacct's --starttime, in order."""
    starts = []
    for line in (bin_dir / "calls.log").read_text().splitlines():
        if line.startswith("sacct "):
            (start,) = [word for word in line.split() if word.startswith("--starttime=")]
            starts.append(start.removeprefix("--starttime="))
    return starts


async def _polls(
    tmp_path: Path,
    bin_dir: Path,
    steps: list[tuple[float, str, bool]],
    host_clock_step: tuple[float, float] = (0.0, 0.0),
) -> None:
    """A poll at each (seconds after START on Slurm's clock, sdiag's queue length, whether
    sacct answers); from `host_clock_step`'s first second on, this host's wall clock is its
    second's seconds away from Slurm's."""
    clock = Clock()
    writer = StoreWriter(str(tmp_path / "skybot.db"))
    config = _config(tmp_path, bin_dir)
    poller = SlurmPoller(
        config.default_cluster, config, writer, clock=clock, monotonic=clock.monotonic
    )
    step_at, step = host_clock_step
    try:
        for at, queue, sacct_answers in steps:
            clock.since_start = at
            clock.now = START + at + (step if at >= step_at and step_at else 0.0)
            (bin_dir / "slurm_time").write_text(str(int(START + at)))
            (bin_dir / "queue").write_text(queue)
            (bin_dir / "sacct.fails").unlink(missing_ok=True)
            if not sacct_answers:
                (bin_dir / "sacct.fails").write_text("")
            assert await poller.poll_jobs()
    finally:
        await poller.close()
        writer.close()


def _at(seconds: float) -> str:
    return _slurm_time(START + seconds)


async def test_once_slurmdbd_has_every_end_the_window_starts_just_before(
    tmp_path: Path, bin_dir: Path
) -> None:
    steps = [(0, "0", True), (400, "0", True), (415, "0", True), (430, "0", True)]
    await _polls(tmp_path, bin_dir, steps)
    assert _windows(bin_dir) == [
        _at(0),  # a new store: nothing from before its first poll
        _at(0),
        _at(400 - OVERLAP),  # the queue empty at 0 is read past: no shorter than before
        # Empty at 400 and read past by 415's sacct: not 415 - 300.
        _at(400 - SACCT_CAUGHT_UP_MARGIN_SECONDS),
    ]


async def test_while_slurmctld_still_holds_ends_the_window_stays_back(
    tmp_path: Path, bin_dir: Path
) -> None:
    steps = [
        (0, "0", True),
        (400, "0", True),
        (415, "12000", True),  # a mass cancel: its ends are still on their way
        (430, "3", True),
        (445, "0", True),
        (460, "0", True),
        (475, "0", True),
    ]
    await _polls(tmp_path, bin_dir, steps)
    assert _windows(bin_dir)[3:] == [
        _at(400 - SACCT_CAUGHT_UP_MARGIN_SECONDS),
        # Only ends before 400 are known read until an empty queue is read past again.
        _at(400 - SACCT_CAUGHT_UP_MARGIN_SECONDS),
        _at(400 - SACCT_CAUGHT_UP_MARGIN_SECONDS),
        _at(445 - SACCT_CAUGHT_UP_MARGIN_SECONDS),
    ]


async def test_the_window_is_never_longer_than_the_full_look_back(
    tmp_path: Path, bin_dir: Path
) -> None:
    """A busy queue that is never seen empty: as before, the last poll minus the overlap."""
    steps = [(0, "0", True), (15, "5", True), (1000, "5", True), (1015, "5", True)]
    await _polls(tmp_path, bin_dir, steps)
    assert _windows(bin_dir)[-1] == _at(1000 - OVERLAP)


async def test_without_a_word_from_sdiag_the_window_looks_back_in_full(
    tmp_path: Path, bin_dir: Path
) -> None:
    (bin_dir / "sdiag").unlink()
    await _polls(tmp_path, bin_dir, [(0, "0", True), (400, "0", True), (415, "0", True)])
    assert _windows(bin_dir)[-1] == _at(400 - OVERLAP)
    (bin_dir / "calls.log").write_text("")
    _program(bin_dir, "sdiag", "echo 'Jobs submitted: 3'")  # not slurmdbd's accounting
    await _polls(tmp_path, bin_dir, [(500, "0", True), (515, "0", True)])
    assert _windows(bin_dir)[-1] == _at(500 - OVERLAP)


async def test_a_sacct_that_failed_reads_past_nothing(tmp_path: Path, bin_dir: Path) -> None:
    """An empty queue counts only once a later sacct has answered."""
    steps = [
        (0, "0", True),
        (400, "0", True),
        (415, "0", False),
        (430, "0", True),
        (445, "0", True),
    ]
    await _polls(tmp_path, bin_dir, steps)
    assert _windows(bin_dir)[2:] == [
        _at(400 - OVERLAP),
        _at(400 - OVERLAP),  # 415's sacct failed: still from the last one that answered
        _at(415 - SACCT_CAUGHT_UP_MARGIN_SECONDS),  # empty at 415, read past at 430
    ]


async def test_a_clock_stepped_back_forgets_when_the_queue_was_empty(
    tmp_path: Path, bin_dir: Path
) -> None:
    """Ends after the step carry times before those the queue was seen empty at."""
    steps = [(0, "0", True), (400, "0", True), (415, "0", True), (100, "0", True)]
    await _polls(tmp_path, bin_dir, steps)
    # As without sdiag after a step back (the full look-back from the stepped-back now,
    # 100 - OVERLAP, no earlier than the store's first poll at 0), not from 415 - 10.
    assert _windows(bin_dir)[-1] == _at(0)


async def test_a_step_of_this_hosts_clock_alone_leaves_the_window_in_slurms_time(
    tmp_path: Path, bin_dir: Path
) -> None:
    """NTP steps the bot's node back an hour, not the controller: the windows are those of
    a run without the step. They were made from this host's clock, so each started an hour
    back in Slurm's time and re-read every job end of that hour, poll after poll."""
    steps = [(0, "0", True), (400, "0", True), (415, "0", True), (430, "0", True)]
    await _polls(tmp_path, bin_dir, steps, host_clock_step=(415, -3600))
    assert _windows(bin_dir) == [
        _at(0),
        _at(0),
        _at(400 - OVERLAP),
        _at(400 - SACCT_CAUGHT_UP_MARGIN_SECONDS),
    ]


async def test_slurms_own_clock_stepped_back_still_forgets_when_the_queue_was_empty(
    tmp_path: Path, bin_dir: Path
) -> None:
    """The controller's clock and this host's both stepped back (sdiag says so): as when
    there is no sdiag time, the full look-back from the stepped-back time."""
    steps = [(0, "0", True), (400, "0", True), (415, "0", True), (100, "0", True), (115, "0", True)]
    await _polls(tmp_path, bin_dir, steps)
    # The fourth poll's window is made before its sdiag tells the step: from 430 in Slurm's
    # time, carried on the monotonic clock; the fifth knows it.
    assert _windows(bin_dir)[-1] == _at(0)


def test_the_queue_and_the_time_are_read_from_sdiags_own_text() -> None:
    """The head of sdiag's report as the 22.05 test cluster prints it (24.11's has the same
    lines): the controller's own agent queue is another line."""
    shown = (
        b"*******************************************************\n"
        b"sdiag output at Mon Dec 07 20:28:35 2026 (1796675315)\n"
        b"Data since      Mon Dec 07 20:27:35 2026 (1796675255)\n"
        b"*******************************************************\n"
        b"Server thread count:  3\nAgent queue size:     7\nAgent count:          0\n"
        b"Agent thread count:   0\nDBD Agent queue size: 0\n\nJobs submitted: 181\n"
    )
    assert diag_from_sdiag(shown) == ControllerDiag(dbd_queue_size=0, server_time=1796675315)
    assert diag_from_sdiag(shown.replace(b"DBD Agent queue size: 0", b"")).dbd_queue_size is None
    assert diag_from_sdiag(b"Jobs submitted: 3\n") == ControllerDiag(None, None)


def test_the_queue_and_the_time_are_read_from_slurmrestds_diag() -> None:
    """As the test clusters' slurmrestd answer: 22.05's v0.0.38 a plain number, 24.11's a
    number struct."""
    v38 = {"statistics": {"req_time": 1796675324, "dbd_agent_queue_size": 0}}
    number = {"set": True, "infinite": False, "number": 1796675332}
    v41 = {"statistics": {"req_time": number, "dbd_agent_queue_size": 4}}
    assert diag_from_restd(v38) == ControllerDiag(dbd_queue_size=0, server_time=1796675324)
    assert diag_from_restd(v41) == ControllerDiag(dbd_queue_size=4, server_time=1796675332)
    unset = {"statistics": {"req_time": {"set": False, "number": 0}, "dbd_agent_queue_size": "x"}}
    assert diag_from_restd(unset) == ControllerDiag(None, None)
    assert diag_from_restd({"errors": []}) == ControllerDiag(None, None)
