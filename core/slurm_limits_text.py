"""22.05's text forms of the cluster's limits (its scontrol has no --json, its sacctmgr neither):
`scontrol --oneliner show partition|reservation` and `sacctmgr --parsable2 --noheader show qos
format=name,maxtrespu,maxwall,maxjobspu`. The records are core/slurm_limits.py's."""

from __future__ import annotations

import re
from datetime import datetime

from core.slurm_limits import PartitionLimits, QosLimits, Reservation, names

QOS_FORMAT = "format=name,maxtrespu,maxwall,maxjobspu"

_PAIR = re.compile(r"(\w+)=(\S*)")
_DURATION = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")
_GPU_ITEM = re.compile(r"(?:^|,)gres/gpu=(\d+)(?:,|$)")
_UNLIMITED = {"", "UNLIMITED", "INFINITE", "NONE", "N/A", "(null)"}


def duration_minutes(text: str) -> int | None:
    """Slurm's time ("2-00:00:00", "04:00:00", "30:00", "90") in minutes; None: unlimited.

    As sbatch reads them: "M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S"; seconds round up."""
    text = text.strip()
    if text.upper() in _UNLIMITED:
        return None
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"not a Slurm time: {text!r}")
    days, first, second, third = match.groups()
    parts = [int(p) for p in (first, second, third) if p is not None]
    if days is not None:  # D-H[:M[:S]]
        hours, minutes, seconds = [*parts, 0, 0][:3]
        return int(days) * 1440 + hours * 60 + minutes + (seconds > 0)
    if len(parts) == 3:
        return parts[0] * 60 + parts[1] + (parts[2] > 0)
    if len(parts) == 2:
        return parts[0] + (parts[1] > 0)
    return parts[0]


def _pairs(line: str) -> dict[str, str]:
    return dict(_PAIR.findall(line))


def _count(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def parse_partitions_text(text: str) -> tuple[list[PartitionLimits], list[str]]:
    found, warnings = [], []
    for line in text.splitlines():
        pairs = _pairs(line)
        if "PartitionName" not in pairs:
            continue
        try:
            time = duration_minutes(pairs.get("MaxTime", ""))
        except ValueError as error:
            warnings.append(f"partition {pairs['PartitionName']}: {error}")
            time = None
        qos = pairs.get("QoS", "")
        found.append(
            PartitionLimits(
                pairs["PartitionName"],
                time,
                _count(pairs.get("MaxNodes", "")),
                "" if qos in _UNLIMITED else qos,
            )
        )
    return found, warnings


def parse_reservations_text(text: str) -> tuple[list[Reservation], list[str]]:
    """scontrol's times are the host's local time, as `_slurm_time` writes them for sacct."""
    found, warnings = [], []
    for line in text.splitlines():
        pairs = _pairs(line)
        if "ReservationName" not in pairs:
            continue
        try:
            start = datetime.fromisoformat(pairs["StartTime"]).timestamp()
            end = datetime.fromisoformat(pairs["EndTime"]).timestamp()
        except (KeyError, ValueError):
            warnings.append(f"reservation {pairs['ReservationName']}: unreadable window")
            continue
        found.append(
            Reservation(
                pairs["ReservationName"],
                int(start),
                int(end),
                names(pairs.get("Nodes", "")),
                names(pairs.get("Flags", "")),
                names(pairs.get("Users", "")) + names(pairs.get("Accounts", "")),
            )
        )
    return found, warnings


def parse_qos_text(text: str) -> tuple[list[QosLimits], list[str]]:
    """Lines of `name|maxtrespu|maxwall|maxjobspu`."""
    found, warnings = [], []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 4 or not parts[0]:
            if line.strip():
                warnings.append(f"sacctmgr qos line ignored: {line[:80]!r}")
            continue
        gpus = _GPU_ITEM.search(parts[1])
        try:
            wall = duration_minutes(parts[2])
        except ValueError as error:
            warnings.append(f"qos {parts[0]}: {error}")
            wall = None
        found.append(QosLimits(parts[0], int(gpus[1]) if gpus else None, wall, _count(parts[3])))
    return found, warnings
