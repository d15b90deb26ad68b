"""The cluster's own limits and reservations, as Slurm states them: partitions (MaxTime,
MaxNodes, QOS), QOS limits and reservations. Read on the poll (scheduler/slurm/poller.py
`poll_limits`), stored whole per cluster, and quoted by `/sky why`, `/sky gpus` and `/sky free`
instead of any site's numbers.

Parsers for the JSON of `scontrol show partition|reservation --json`, `sacctmgr --json show
qos` (23.02+) and slurmrestd's partitions, reservations and qos (22.05's v0.0.38 and
23.02+'s data_parser alike); 22.05's text forms are in core/slurm_limits_text.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.priority import PendingPriority, PriorityFactors
from core.slurm_json.fields import BadField, as_number
from core.slurm_json.nodes import _expand_hostlist

# Larger is no real limit (Slurm's NO_VAL/INFINITE leak as 0xfffffffe/0xffffffff).
_NO_LIMIT = 0xFFFFFFFE


@dataclass(frozen=True, slots=True)
class PartitionLimits:
    """One partition's limits; None: unlimited (or not set)."""

    name: str
    max_time_minutes: int | None = None
    max_nodes: int | None = None
    # The partition's own QOS ("" for none), whose limits apply to every job in it.
    qos: str = ""


@dataclass(frozen=True, slots=True)
class QosLimits:
    """One QOS's limits skybot explains; None: no limit."""

    name: str
    max_gpus_per_user: int | None = None
    max_wall_minutes: int | None = None
    max_jobs_per_user: int | None = None


@dataclass(frozen=True, slots=True)
class Reservation:
    """A reservation: its window (epoch seconds), nodes, flags (MAINT, …) and who may use it."""

    name: str
    start: int
    end: int
    nodes: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    # Users and accounts allowed in it, as Slurm lists them ("alice,bob", "hoffman-lab").
    users: tuple[str, ...] = ()

    @property
    def maintenance(self) -> bool:
        return "MAINT" in self.flags

    def active(self, now: float) -> bool:
        return self.start <= now < self.end


@dataclass(frozen=True, slots=True)
class SlurmLimits:
    """Everything of the cluster's limits one poll read, and the pending jobs' priorities
    (core/priority.py; empty where the source cannot read them cheaply)."""

    partitions: tuple[PartitionLimits, ...] = ()
    qos: tuple[QosLimits, ...] = ()
    reservations: tuple[Reservation, ...] = field(default_factory=tuple)
    pending: tuple[PendingPriority, ...] = ()
    # The site's priority weights (sprio -w); None where priority/multifactor does not run.
    weights: PriorityFactors | None = None

    def partition(self, name: str) -> PartitionLimits | None:
        return next((p for p in self.partitions if p.name == name), None)

    def qos_named(self, name: str) -> QosLimits | None:
        return next((q for q in self.qos if q.name == name), None)

    def priority_of(self, job_id: int) -> PendingPriority | None:
        return next((p for p in self.pending if p.job_id == job_id), None)


def limit(value: object) -> int | None:
    """A limit from any Slurm spelling: None for unset, infinite, -1 or a leaked sentinel."""
    try:
        number = as_number(value)
    except BadField:
        return None
    if number is None or number < 0 or number >= _NO_LIMIT:
        return None
    return number


def names(text: object) -> tuple[str, ...]:
    """ "a,b" or ["a", "b"] as a tuple; nodes in a hostlist ("gpu[1-3]") expanded."""
    parts = text if isinstance(text, list) else str(text or "").split(",")
    # A hostlist with commas inside its brackets ("gpu[1-2,5]") is split back together.
    joined: list[str] = []
    for part in (str(p).strip() for p in parts):
        if joined and joined[-1].count("[") > joined[-1].count("]"):
            joined[-1] += "," + part
        elif part and part != "(null)":
            joined.append(part)
    return tuple(name for each in joined for name in _expand_hostlist(each))


def parse_partitions_json(document: dict[str, Any]) -> list[PartitionLimits]:
    """Partitions from 23.02+'s `maximums` object, or 22.05 slurmrestd's flat fields."""
    found = []
    for raw in document.get("partitions") or []:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            continue
        maximums = raw.get("maximums")
        if isinstance(maximums, dict):
            time, nodes = maximums.get("time"), maximums.get("nodes")
            qos = raw.get("qos")
            assigned = qos.get("assigned") if isinstance(qos, dict) else ""
        else:  # v0.0.38: minutes, -1 for none
            time, nodes = raw.get("max_time_limit"), raw.get("maximum_nodes_per_job")
            assigned = raw.get("qos")
        found.append(PartitionLimits(raw["name"], limit(time), limit(nodes), str(assigned or "")))
    return found


def parse_reservations_json(document: dict[str, Any]) -> list[Reservation]:
    found = []
    for raw in document.get("reservations") or []:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            continue
        start, end = limit(raw.get("start_time")), limit(raw.get("end_time"))
        if start is None or end is None:
            continue
        flags = raw.get("flags")
        found.append(
            Reservation(
                raw["name"],
                start,
                end,
                names(raw.get("node_list")),
                tuple(str(f) for f in flags) if isinstance(flags, list) else names(flags),
                names(raw.get("users")) + names(raw.get("accounts")),
            )
        )
    return found


def parse_qos_json(document: dict[str, Any]) -> list[QosLimits]:
    """QOS from `sacctmgr --json show qos` / slurmdb's qos ("QOS" on 22.05's v0.0.38)."""
    found = []
    for raw in document.get("qos") or document.get("QOS") or []:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            continue
        maximum = _dig(raw, "limits", "max")
        gpus = _gpu_count(_dig(maximum, "tres", "per", "user"))
        found.append(
            QosLimits(
                raw["name"],
                gpus,
                limit(_dig(maximum, "wall_clock", "per", "job")),
                limit(_dig(maximum, "jobs", "active_jobs", "per", "user")),
            )
        )
    return found


def _gpu_count(tres: object) -> int | None:
    """The untyped `gres/gpu` entry of a TRES list ([{type, name, count}])."""
    for item in tres if isinstance(tres, list) else []:
        if isinstance(item, dict) and item.get("type") == "gres" and item.get("name") == "gpu":
            return limit(item.get("count"))
    return None


def _dig(value: object, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value
