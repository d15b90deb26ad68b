"""The back-off's probe: `scontrol ping` once per interval while the controller is down, the
full poll as soon as it answers, and nothing extra for a controller that answers pings but
fails the poll (struggling, not down). Slurm's commands are scripts here that log each run."""

from __future__ import annotations

import time
from pathlib import Path

from msgspec.structs import replace

from bot.config import DatabaseConfig, SlurmConfig, load_config
from handlers.commands.common import outage_words
from scheduler.slurm.poller import SlurmPoller
from store.snapshots import load_snapshot
from store.writer import StoreWriter
from tests.support.slurm_wrappers import write_wrappers

FIXTURES = Path(__file__).parent / "fixtures" / "slurm" / "v0.0.38"
POLL = 5.0
NO_STATES_ONLY = """case "$*" in *--only-job-state*)
  echo "squeue: unrecognized option '--only-job-state'" >&2; exit 1;;
esac"""


class FakeSlurm:
    """Slurm's commands as scripts: the controller's (squeue, sinfo, scontrol ping) answer or
    fail as the test says; every run is logged."""

    def __init__(self, root: Path) -> None:
        self.log = root / "runs.log"
        self.log.touch()
        self.down = root / "down"  # nothing of the controller answers
        self.struggling = root / "struggling"  # pings answer, the poll fails
        fail_poll = f"[ -e {self.down} ] || [ -e {self.struggling} ] && exit 1"
        scripts = {
            # 22.05's squeue, as the fixtures are: no states-only listing.
            "squeue": f"{fail_poll}\n{NO_STATES_ONLY}\ncat {FIXTURES / 'squeue.json'}",
            "sinfo": f"{fail_poll}\ncat {FIXTURES / 'sinfo.json'}",
            "sacct": f"cat {FIXTURES / 'sacct.json'}",
            "scontrol": f"[ -e {self.down} ] && exit 1\necho 'Slurmctld(primary) at c is UP'",
        }
        self.bin = write_wrappers(
            root / "bin",
            {name: f"echo {name} >> {self.log}\n{body}" for name, body in scripts.items()},
        )

    def runs(self) -> list[str]:
        """The commands run since the last call."""
        names = self.log.read_text().split()
        self.log.write_text("")
        return names


def _poller(
    tmp_path: Path, slurm: FakeSlurm, clock: list[float], timeout: float = 20.0
) -> SlurmPoller:
    config = replace(
        load_config(None),
        slurm=SlurmConfig(
            bin_dir=str(slurm.bin), poll_seconds=POLL, command_timeout_seconds=timeout
        ),
        database=DatabaseConfig(path=str(tmp_path / "skybot.db")),
    )
    return SlurmPoller(
        config.default_cluster, config, StoreWriter(config.database.path), clock=lambda: clock[0]
    )


async def test_a_down_controller_gets_one_ping_per_interval_and_the_poll_once_it_answers(
    tmp_path: Path,
) -> None:
    slurm = FakeSlurm(tmp_path)
    clock = [1_000_000.0]
    poller = _poller(tmp_path, slurm, clock)
    assert await poller.poll_jobs()
    slurm.down.touch()
    for _ in range(4):  # three failures and one ping: the next try is at +40 s
        clock[0] += POLL
        await poller.poll_jobs()
    slurm.runs()
    for _ in range(2):
        clock[0] += POLL
        assert await poller.poll_jobs() is False
        assert slurm.runs() == ["scontrol"]
    slurm.down.unlink()
    clock[0] += POLL
    assert await poller.poll_jobs() is True, "current one poll after the controller answers"
    assert sorted(slurm.runs()) == ["sacct", "scontrol", "sinfo", "squeue"]


async def test_a_struggling_controller_gets_the_back_off_without_pings(tmp_path: Path) -> None:
    slurm = FakeSlurm(tmp_path)
    clock = [1_000_000.0]
    poller = _poller(tmp_path, slurm, clock)
    assert await poller.poll_jobs()
    slurm.struggling.touch()
    clock[0] += POLL
    assert await poller.poll_jobs() is False  # fails: back-off 5 s
    clock[0] += POLL
    assert await poller.poll_jobs() is False  # due: fails again, back-off 10 s
    clock[0] += POLL
    slurm.runs()
    # Inside the back-off: the ping answers, the poll it lets through fails...
    assert await poller.poll_jobs() is False
    assert "scontrol" in slurm.runs()
    # ... so the rest of the back-off asks nothing at all.
    clock[0] += 1
    assert await poller.poll_jobs() is False
    assert slurm.runs() == []


async def test_a_failed_read_leaves_no_other_read_of_its_poll_running(tmp_path: Path) -> None:
    """squeue failing ended the poll while its sinfo still ran: that run landed in the next
    poll's (the test above saw an extra sinfo about one time in four)."""
    slurm = FakeSlurm(tmp_path)
    clock = [1_000_000.0]
    poller = _poller(tmp_path, slurm, clock)
    assert await poller.poll_jobs()  # and learns that this squeue has no states-only listing
    finished = tmp_path / "sinfo-finished"
    write_wrappers(
        slurm.bin,
        {
            "squeue": "exit 1",
            "sinfo": f"sleep 0.5\ntouch {finished}\ncat {FIXTURES / 'sinfo.json'}",
        },
    )
    clock[0] += POLL
    assert await poller.poll_jobs() is False
    assert finished.exists(), "the failed poll returned while its sinfo still ran"


async def test_a_wrapper_hung_in_a_child_fails_the_poll_at_the_timeout_and_users_are_warned(
    tmp_path: Path,
) -> None:
    """squeue behind a `bin_dir` wrapper hangs (its child holds the pipes): the poll ends at
    the command timeout, not when the child gives up, and the first failed poll warns."""
    slurm = FakeSlurm(tmp_path)
    hang = tmp_path / "hang"
    squeue = slurm.bin / "squeue"
    squeue.write_text(
        squeue.read_text().replace(
            "#!/bin/sh\n", f"#!/bin/sh\n[ -e {hang} ] && {{ sleep 30 & wait; }}\n"
        )
    )
    clock = [time.time()]
    poller = _poller(tmp_path, slurm, clock, timeout=0.5)
    assert await poller.poll_jobs()
    hang.touch()
    clock[0] += POLL
    started = time.monotonic()
    assert await poller.poll_jobs() is False
    assert time.monotonic() - started < 5.0
    snapshot = await poller._writer.run(load_snapshot, poller.cluster)
    status = snapshot.source("slurm")
    assert status.failing and "squeue timed out after 0.5 s" in (status.error or "")
    words = outage_words("slurm", status.error or "", status.error_at, "5 s ago", clock[0])
    assert words.startswith("The Slurm controller (slurmctld) has not answered since ")
    await poller.close()
