"""Successive Slurm polls from the recorded fixtures (tests/fixtures/slurm), written to files as
the poller's commands write theirs, and the DigestRequest that reads them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from scheduler.slurm.wire import DigestRequest, LabLimits

FIXTURES = Path(__file__).parents[1] / "fixtures" / "slurm"


LIMITS = LabLimits((("hoffman-lab", "hoffman-lab"),), {"hoffman-lab": 4}, {}, "overcap")


def _load(version: str, name: str) -> Any:
    return json.loads((FIXTURES / version / name).read_text())


def _nodes_document(version: str) -> Any:
    # 23.02+ sinfo groups nodes; the poller reads them from scontrol there.
    return _load(version, "nodes.json" if version == "v0.0.42" else "sinfo.json")


def _set_state(record: dict[str, Any], state: str) -> None:
    record["job_state"] = [state] if isinstance(record["job_state"], list) else state


def _polls(version: str) -> list[tuple[Any, Any, Any]]:
    """(squeue, nodes, sacct or None) for successive polls: a job ends, one leaves squeue,
    one is renamed, a node goes; then nothing changes; then everything comes back."""
    squeue, nodes, sacct = _load(version, "squeue.json"), _nodes_document(version), None
    first = (squeue, nodes, sacct)
    changed = copy.deepcopy(squeue)
    _set_state(changed["jobs"][0], "COMPLETED")
    del changed["jobs"][1]
    changed["jobs"][1]["name"] = "renamed"
    fewer_nodes = copy.deepcopy(nodes)
    fewer_nodes["nodes"] = fewer_nodes["nodes"][1:]
    second = (changed, fewer_nodes, _load(version, "sacct.json"))
    return [first, second, second, first]


def _write(folder: Path, squeue: Any, nodes: Any, sacct: Any) -> DigestRequest:
    folder.mkdir(exist_ok=True)
    (folder / "squeue.json").write_text(json.dumps(squeue))
    (folder / "nodes.json").write_text(json.dumps(nodes))
    if sacct is not None:
        (folder / "sacct.json").write_text(json.dumps(sacct))
    return DigestRequest(
        squeue=(folder / "squeue.json",),
        nodes=folder / "nodes.json",
        sacct=folder / "sacct.json" if sacct is not None else None,
        limits=LIMITS,
        base=None,
    )


def _fields(request: DigestRequest) -> dict[str, Any]:
    return {name: getattr(request, name) for name in DigestRequest.__slots__}
