"""Which source the Slurm poller reads, decided from what each Slurm generation prints.

No cluster: slurm.bin_dir holds tiny programs that print Slurm documents (the v0.0.42 ones
are 23.02+ shapes), so the poller's own choice between sources is what is tested.
"""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from bot.config import Config
from core.records import Node
from scheduler.slurm.cli_source import CliSource
from scheduler.slurm.poller import SlurmPoller
from store.snapshots import load_snapshot
from store.writer import StoreWriter
from tests.support.factories import CLUSTER
from tests.support.fake_squeue import _config
from tests.support.slurm_wrappers import program

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"


def _load(version: str, name: str) -> Any:
    return json.loads((FIXTURES / version / name).read_text())


def _printing(bin_dir: Path, command: str, document: Any) -> None:
    path = bin_dir / f"{command}.json"
    path.write_text(json.dumps(document))
    program(bin_dir, command, f"exec cat {shlex.quote(str(path))}")


def _grouped_sinfo_and_nodes() -> tuple[dict[str, Any], dict[str, Any]]:
    """23.02+ sinfo with one group of two a40 nodes that have 4 and 8 GPUs, and a CPU-only
    node grouped with an idle GPU node: each group carries its first node's totals."""
    sinfo = _load("v0.0.42", "sinfo.json")
    nodes = _load("v0.0.42", "nodes.json")
    template = next(e for e in sinfo["sinfo"] if e["nodes"]["nodes"] == ["clippy"])
    pair = copy.deepcopy(template)
    pair["nodes"].update(nodes=["clippy", "clippy2"], hostnames=["clippy", "clippy2"], total=2)
    pair["gres"] = {"total": "gpu:a40:4(S:0-1)", "used": "gpu:a40:0(IDX:N/A)"}
    pair["node"] = {"state": ["IDLE"]}
    mixed = copy.deepcopy(template)
    mixed["nodes"].update(nodes=["gpubox", "cpubox"], hostnames=["gpubox", "cpubox"], total=2)
    mixed["gres"] = {"total": "gpu:rtx_6000:2", "used": "gpu:rtx_6000:0(IDX:N/A)"}
    mixed["node"] = {"state": ["IDLE"]}
    sinfo["sinfo"] = [pair, mixed]

    base = next(n for n in nodes["nodes"] if n["name"] == "clippy")

    def node(name: str, gres: str, used: str) -> dict[str, Any]:
        return {**copy.deepcopy(base), "name": name, "gres": gres, "gres_used": used,
                "state": ["IDLE"], "alloc_cpus": 0}  # fmt: skip

    nodes["nodes"] = [
        node("clippy", "gpu:a40:4(S:0-1)", "gpu:a40:0(IDX:N/A)"),
        node("clippy2", "gpu:a40:8(S:0-1)", "gpu:a40:0(IDX:N/A)"),
        node("gpubox", "gpu:rtx_6000:2", "gpu:rtx_6000:0(IDX:N/A)"),
        node("cpubox", "", ""),
    ]
    return sinfo, nodes


@pytest.fixture
def grouped_slurm(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sinfo, nodes = _grouped_sinfo_and_nodes()
    _printing(bin_dir, "sinfo", sinfo)
    _printing(bin_dir, "scontrol", nodes)
    _printing(bin_dir, "squeue", _load("v0.0.42", "squeue.json"))
    _printing(bin_dir, "sacct", _load("v0.0.42", "sacct.json"))
    return bin_dir


async def _nodes_after_polls(config: Config, polls: int) -> dict[str, Node]:
    writer = StoreWriter(config.database.path)
    try:
        poller = SlurmPoller(config.default_cluster, config, writer)
        for _ in range(polls):
            assert await poller.poll_jobs()
        snapshot = await writer.run(load_snapshot, CLUSTER)
    finally:
        writer.close()
    return {n.name: n for n in snapshot.nodes}


async def test_grouped_sinfo_gives_per_node_gpu_totals(tmp_path: Path, grouped_slurm: Path) -> None:
    nodes = await _nodes_after_polls(_config(tmp_path, grouped_slurm), polls=2)
    assert {name: n.gpus_total for name, n in nodes.items()} == {
        "clippy": {"a40": 4},
        "clippy2": {"a40": 8},
        "gpubox": {"rtx_6000": 2},
        "cpubox": {},
    }
    assert nodes["clippy2"].gpus_idle == {"a40": 8}
    assert "hoffman-lab" in nodes["clippy"].partitions
    # Found out once, from the first grouped answer; later polls go straight to scontrol.
    calls = (grouped_slurm / "calls.log").read_text().splitlines()
    assert [c.split()[0] for c in calls if c.split()[0] in ("sinfo", "scontrol")] == [
        "sinfo",
        "scontrol",
        "scontrol",
    ]


async def test_per_node_sinfo_is_used_as_it_is(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _printing(bin_dir, "sinfo", _load("v0.0.38", "sinfo.json"))
    program(bin_dir, "scontrol", "echo \"scontrol: unrecognized option '--json'\" >&2; exit 1")
    _printing(bin_dir, "squeue", _load("v0.0.38", "squeue.json"))
    _printing(bin_dir, "sacct", _load("v0.0.38", "sacct.json"))
    nodes = await _nodes_after_polls(_config(tmp_path, bin_dir), polls=2)
    assert {name: n.gpus_total for name, n in nodes.items()} == {
        "baymax": {"2080_ti": 4},
        "clippy": {"a40": 4},
        "xaea-12": {"rtx_6000": 4},
    }
    assert "scontrol" not in (bin_dir / "calls.log").read_text()


async def _caps(config: Config, polls: int) -> tuple[dict[str, int | None], dict[str, Any]]:
    writer = StoreWriter(config.database.path)
    try:
        poller = SlurmPoller(config.default_cluster, config, writer)
        for _ in range(polls):
            assert await poller.poll_caps()
        snapshot = await writer.run(load_snapshot, CLUSTER)
    finally:
        writer.close()
    return {c.account: c.gpu_cap for c in snapshot.caps}, dict(snapshot.members)


EXPECTED_CAPS = {"hoffman-lab": 4, "kira-lab": 4, "overcap": None}


async def test_caps_from_sacctmgr_json_where_it_exists(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    associations = {
        "associations": [
            {"account": "root", "user": "", "max": {"tres": {"total": []}}},
            {"account": "hoffman-lab", "user": "",
             "max": {"tres": {"total": [{"type": "gres", "name": "gpu", "id": 1001, "count": 4}]}}},
            {"account": "hoffman-lab", "user": "alice", "max": {"tres": {"total": []}}},
            {"account": "kira-lab", "user": "",
             "max": {"tres": {"total": [{"type": "gres", "name": "gpu:a40", "count": 2},
                                        {"type": "gres", "name": "gpu", "count": 4}]}}},
            {"account": "overcap", "user": "", "max": {"tres": {"total": []}}},
            {"account": "overcap", "user": "dave", "max": {"tres": {"total": []}}},
        ],
        "errors": [],
        "warnings": [],
    }  # fmt: skip
    _printing(bin_dir, "sacctmgr", associations)
    caps, members = await _caps(_config(tmp_path, bin_dir), polls=2)
    assert caps == EXPECTED_CAPS
    assert members == {"hoffman-lab": frozenset({"alice"}), "overcap": frozenset({"dave"})}
    calls = (bin_dir / "calls.log").read_text().splitlines()
    assert all("--json" in call for call in calls)


async def test_caps_from_parsable2_where_sacctmgr_has_no_json(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    table = FIXTURES / "v0.0.38" / "sacctmgr_assoc.txt"
    # 22.05's sacctmgr, word for word.
    program(
        bin_dir,
        "sacctmgr",
        'case "$*" in *--json*) echo "sacctmgr: unrecognized option \'--json\'" >&2;'
        " echo 'Try \"sacctmgr --help\" for more information' >&2; exit 1;; esac\n"
        f"exec cat {shlex.quote(str(table))}",
    )
    caps, members = await _caps(_config(tmp_path, bin_dir), polls=3)
    assert caps == EXPECTED_CAPS
    assert members["kira-lab"] == frozenset({"carol", "dave"})
    calls = (bin_dir / "calls.log").read_text().splitlines()
    # Asked once whether --json exists; from then on straight to --parsable2.
    assert ["--json" in call for call in calls] == [True, False, False, False]


async def test_a_poller_reads_the_cluster_its_source_names(tmp_path: Path) -> None:
    """The cluster is the poller's parameter: its source's commands and slurm.conf are
    used, not `[slurm]`'s (whose bin_dir here holds no Slurm at all)."""
    bin_dir = tmp_path / "other-cluster"
    bin_dir.mkdir()
    for command, document in [("sinfo", "sinfo.json"), ("squeue", "squeue.json")]:
        path = bin_dir / document
        path.write_text(json.dumps(_load("v0.0.38", document)))
        # Each run says which slurm.conf it was given.
        program(bin_dir, command, f'echo "$SLURM_CONF" >> {shlex.quote(str(bin_dir / "conf.log"))}'
                 f"; exec cat {shlex.quote(str(path))}")  # fmt: skip
    _printing(bin_dir, "sacct", _load("v0.0.38", "sacct.json"))
    config = _config(tmp_path, tmp_path / "no-slurm-here")
    source = CliSource(str(bin_dir), timeout=10, slurm_conf="/etc/slurm-other/slurm.conf")
    writer = StoreWriter(config.database.path)
    try:
        other = replace(config.default_cluster, name="other")
        poller = SlurmPoller(other, config, writer, source=source)
        assert poller.cluster == "other"
        assert await poller.poll_jobs()
        snapshot = await writer.run(load_snapshot, "other")
        # Its rows are the cluster's it polls, none the default's.
        assert not (await writer.run(load_snapshot, CLUSTER)).nodes
        await poller.close()
    finally:
        writer.close()
    assert {n.name for n in snapshot.nodes} == {"baymax", "clippy", "xaea-12"}
    assert snapshot.jobs
    confs = (bin_dir / "conf.log").read_text().splitlines()
    assert confs and set(confs) == {"/etc/slurm-other/slurm.conf"}
