"""The limits poll (scheduler/slurm/poller.py `poll_limits`) against stand-in Slurm commands:
22.05's text where the commands have no --json (asked once), the pending jobs' priorities and
sprio's factors, and a failure that keeps the last limits and says so."""

from __future__ import annotations

import shlex
from pathlib import Path

from core.priority import PendingPriority, PriorityFactors
from core.slurm_limits import PartitionLimits, QosLimits
from scheduler.slurm.poller import SlurmPoller
from store.snapshots import load_snapshot
from store.writer import StoreWriter
from tests.support.factories import CLUSTER
from tests.support.fake_squeue import _config
from tests.support.slurm_wrappers import program

LIMITS = Path(__file__).resolve().parent / "fixtures" / "slurm" / "limits"
NO_JSON = 'case "$*" in *--json*) echo "$0: unrecognized option \'--json\'" >&2; exit 1;; esac\n'


def _slurm_2205(bin_dir: Path) -> None:
    partitions = shlex.quote(str(LIMITS / "scontrol_partitions_22.05.txt"))
    reservations = shlex.quote(str(LIMITS / "scontrol_reservations_22.05.txt"))
    program(bin_dir, "scontrol", NO_JSON + (
        f'[ -e {bin_dir}/down ] && {{ echo "slurm_load_partitions: Unable to contact slurm '
        'controller" >&2; exit 1; }\n'
        f'case "$*" in *partition*) exec cat {partitions};; *) exec cat {reservations};; esac'
    ))  # fmt: skip
    program(bin_dir, "sacctmgr", NO_JSON + "printf 'normal||||\\ngpu|gres/gpu=3|2-00:00:00|4\\n'")
    program(bin_dir, "squeue", "printf '12|180\\n13|1001\\n'")
    program(bin_dir, "sprio", 'case "$*" in *--weights*) echo "Weights|100|1000|100|0|0|";;'
             ' *) echo "12|50|120|10|0|0|180";; esac')  # fmt: skip


async def test_limits_from_2205s_text_then_a_failure_keeps_them(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _slurm_2205(bin_dir)
    config = _config(tmp_path, bin_dir)
    writer = StoreWriter(config.database.path)
    poller = SlurmPoller(config.default_cluster, config, writer)
    try:
        assert await poller.poll_limits()
        limits = (await writer.run(load_snapshot, CLUSTER)).limits
        assert PartitionLimits("debug", 240) in limits.partitions
        assert limits.qos == (QosLimits("normal"), QosLimits("gpu", 3, 2880, 4))
        assert [r.name for r in limits.reservations] == ["why_shape"]
        assert limits.pending == (
            PendingPriority(12, 180, PriorityFactors(50, 120, 10)),
            PendingPriority(13, 1001),
        )
        assert limits.weights == PriorityFactors(100, 1000, 100)

        first_poll = len((bin_dir / "calls.log").read_text().splitlines())
        (bin_dir / "down").touch()
        assert not await poller.poll_limits()
        snapshot = await writer.run(load_snapshot, CLUSTER)
        assert snapshot.limits == limits  # the last good read stays
        status = snapshot.source("limits")
        assert status.failing and "Unable to contact slurm controller" in (status.error or "")
    finally:
        await poller.close()
        writer.close()
    calls = (bin_dir / "calls.log").read_text().splitlines()
    # Whether scontrol and sacctmgr know --json is asked on the first poll only.
    assert any("--json" in c for c in calls[:first_poll])
    assert not any("--json" in c for c in calls[first_poll:])
