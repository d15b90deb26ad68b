"""Reservations as they bear on jobs and GPUs (core/slurm_limits.py reads them): which keep a
pending job off its nodes, the longest `--time` that ends before one starts, which idle GPUs are
reserved, and the alert channel's announcement of a maintenance window."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from core.notice_text import format_duration
from core.records import Job, Node
from core.slack_text import literal
from core.slurm_limits import Reservation, SlurmLimits

# A `--time` offered to end before a reservation leaves this much room: the scheduler may
# take a while to look at the job after the user lowers its limit.
MARGIN_SECONDS = 300
# Shorter than this is no offer worth making.
MIN_OFFER_MINUTES = 5


def clock(timestamp: float) -> str:
    """'1 Dec 14:05 UTC': the cluster's users are in many time zones."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%-d %b %H:%M UTC")


def window(reservation: Reservation, now: float) -> str:
    """'from 1 Dec 14:05 UTC (in 2 h) to 1 Dec 18:05 UTC'; 'until …' once it has begun."""
    end = clock(reservation.end)
    if reservation.start <= now:
        return f"now, until {end} (in {format_duration(reservation.end - now)})"
    start = f"{clock(reservation.start)} (in {format_duration(reservation.start - now)})"
    return f"from {start} to {end}"


def _allowed(reservation: Reservation, job: Job) -> bool:
    return job.user in reservation.users or job.account in reservation.users


def blocking(limits: SlurmLimits, nodes: Sequence[Node], job: Job, now: float) -> list[Reservation]:
    """Reservations on the nodes of the job's partitions that the job may not use and that
    its time limit would run into (all of them for a job with no limit), earliest first."""
    partitions = {p.strip() for p in job.partition.split(",")}
    candidates = {n.name for n in nodes if partitions.intersection(n.partitions)}
    ends = now + job.time_limit_minutes * 60 if job.time_limit_minutes else float("inf")
    found = [
        r
        for r in limits.reservations
        if r.end > now
        and r.start < ends
        and candidates.intersection(r.nodes)
        and not _allowed(r, job)
    ]
    return sorted(found, key=lambda r: (r.start, r.name))


def minutes_before(reservation: Reservation, now: float) -> int | None:
    """The longest whole `--time` in minutes that ends before the reservation starts (with
    MARGIN_SECONDS to spare), or None when there is no worthwhile one."""
    minutes = int((reservation.start - now - MARGIN_SECONDS) // 60)
    return minutes if minutes >= MIN_OFFER_MINUTES else None


# `/sky free` tells of a reservation this far ahead: an idle GPU there takes only jobs
# that end before it.
SOON_SECONDS = 86400


def node_note(limits: SlurmLimits, node: str, now: float) -> str:
    """Why a node's idle GPUs may not be anyone's: '' or 'reserved: `maint` (maintenance)
    until 3 Dec 18:05 UTC' / 'reserved from 3 Dec 18:05 UTC: `maint` (…)'."""
    on = [r for r in limits.reservations if node in r.nodes and r.end > now]
    now_held = [r for r in on if r.start <= now]
    soon = sorted((r for r in on if r.start - now < SOON_SECONDS), key=lambda r: r.start)
    if now_held:
        r = now_held[0]
        return f"reserved: {_named(r)} until {clock(r.end)}, for its users only"
    if soon:
        r = soon[0]
        return f"reserved from {clock(r.start)}: {_named(r)}; only jobs that end before it"
    return ""


def reserved_now(limits: SlurmLimits, node: str, now: float) -> bool:
    return any(node in r.nodes and r.active(now) for r in limits.reservations)


def _named(reservation: Reservation) -> str:
    kind = " (maintenance)" if reservation.maintenance else ""
    return f"{literal(reservation.name)}{kind}"


def announcement(reservation: Reservation, now: float, cluster: str = "") -> str:
    """The alert channel's message for a maintenance reservation newly seen."""
    on = f" on {literal(cluster)}" if cluster else ""
    nodes = ", ".join(literal(n) for n in reservation.nodes[:10])
    more = f" and {len(reservation.nodes) - 10} more" if len(reservation.nodes) > 10 else ""
    return (
        f":construction: Maintenance{on}: reservation {literal(reservation.name)} takes "
        f"{nodes or 'its nodes'}{more} {window(reservation, now)}. Jobs whose time limit "
        "runs into it wait until it ends; a shorter `--time` lets them run before it "
        "(`/sky why JOBID` gives the longest that fits)."
    )
