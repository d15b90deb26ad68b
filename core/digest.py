"""The weekly lab digest: what a lab did with its GPUs and storage in the last seven days.

Pure: the week's figures come in (store/digests.py gathers them), the message lines come out,
and `week_ending` says which week is due. The digest goes only to channels that asked for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo

from core.notice_text import format_bytes, format_signed_bytes, plural
from core.slack_text import literal

WEEK = 7 * 86400.0
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
# Users with less than a GPU-minute in the week are left out of the lists.
MIN_HOURS_LISTED = 1 / 60


@dataclass(frozen=True, slots=True)
class LabWeek:
    """One lab's figures for [since, until)."""

    lab: str
    since: float
    until: float
    cap: int | None
    # (user, on overcap) -> GPU-hours.
    gpu_hours: Mapping[tuple[str, bool], float] = field(default_factory=dict)
    # user -> jobs requeued (preempted, almost always) in the week.
    requeues: Mapping[str, int] = field(default_factory=dict)
    # directory -> (KiB at the start of the week, KiB in the newest report).
    growth: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def lab_hours(self) -> float:
        return sum(h for (_, overcap), h in self.gpu_hours.items() if not overcap)

    @property
    def overcap_hours(self) -> float:
        return sum(h for (_, overcap), h in self.gpu_hours.items() if overcap)


def week_ending(now: float, weekday: str, hour: int, tz: tzinfo | None = None) -> float:
    """The latest digest time (`weekday` at `hour`:00 local time) at or before `now`; `tz`
    None is the host's zone as it is now (its DST rules included)."""
    local = datetime.fromtimestamp(now, tz)
    days_back = (local.weekday() - WEEKDAYS.index(weekday)) % 7
    due = (local - timedelta(days=days_back)).replace(hour=hour, minute=0, second=0, microsecond=0)
    if due > local:
        due -= timedelta(days=7)
    return due.timestamp()


def calendar_week(until: float, tz: tzinfo | None = None) -> str:
    """The lab's calendar week of a digest due at `until`: the ISO year and week of its local
    date ("2026-W50"). Each week has one date of the digest's weekday, whatever the zone
    says the hour is: a time-zone or DST change moves the instant, never the week."""
    year, week, _ = datetime.fromtimestamp(until, tz).date().isocalendar()
    return f"{year}-W{week:02d}"


def digest_key(lab: str, channel: str, week: str) -> str:
    """One digest per lab, channel and calendar week (`calendar_week`): a rerun after a
    crash, or a restart in another time zone, enqueues nothing new. (Keyed by the epoch of
    the posting hour, a zone change across a restart gave the same week a second key.)"""
    return f"digest:{lab}:{channel}:{week}"


def legacy_digest_key(lab: str, channel: str, until: float) -> str:
    """The key skybot gave the same digest before keys named the calendar week."""
    return f"digest:{lab}:{channel}:{int(until)}"


def digest_title(week: LabWeek, tz: tzinfo | None = None) -> str:
    start = datetime.fromtimestamp(week.since, tz)
    end = datetime.fromtimestamp(week.until, tz)
    return f"{literal(week.lab)}: the week of {start:%a %d %b} to {end:%a %d %b %Y}"


def digest_lines(week: LabWeek, top_users: int = 10) -> list[str]:
    """The digest's paragraphs, in Slack mrkdwn."""
    return [_gpu_paragraph(week, top_users), _overcap_line(week), *_storage_lines(week)]


def _gpu_paragraph(week: LabWeek, top_users: int) -> str:
    hours = week.lab_hours
    head = f"*GPU-hours in {literal(week.lab)}*: {format_hours(hours)}"
    if week.cap:
        available = week.cap * (week.until - week.since) / 3600
        head += (
            f" of {format_hours(available)} under the cap of {plural(week.cap, 'GPU')} "
            f"({hours / available:.0%})"
        )
    by_user = _by_user(week, overcap=False)
    if not by_user:
        return f"{head}\nNobody ran GPU jobs in the lab's partition this week."
    lines = [head]
    for user, user_hours in list(by_user.items())[:top_users]:
        extra = week.gpu_hours.get((user, True), 0.0)
        also = f" (+{format_hours(extra)} on overcap)" if extra >= MIN_HOURS_LISTED else ""
        lines.append(f"• {literal(user)}: {format_hours(user_hours)}{also}")
    if len(by_user) > top_users:
        rest = list(by_user.values())[top_users:]
        lines.append(f"• … and {len(rest)} more users with {format_hours(sum(rest))}")
    return "\n".join(lines)


def format_hours(hours: float) -> str:
    """GPU time as people say it: '1,234 h', '12.5 h', '40 min'."""
    if hours >= 100:
        return f"{hours:,.0f} h"
    if hours >= 1:
        return f"{hours:.1f} h"
    return f"{hours * 60:.0f} min"


def _overcap_line(week: LabWeek) -> str:
    users = _by_user(week, overcap=True)
    preempted = sum(week.requeues.values())
    if not users and not preempted:
        return "*Overcap*: not used this week; no jobs were preempted."
    used = (
        f"{format_hours(week.overcap_hours)} of GPU time by {len(users)} "
        f"{'member' if len(users) == 1 else 'members'}"
        if users
        else "not used"
    )
    if preempted:
        who = ", ".join(f"{literal(u)} {n}" for u, n in sorted(week.requeues.items(), key=_biggest))
        jobs = plural(preempted, "job")
        return f"*Overcap*: {used}; {jobs} preempted and requeued ({who})."
    return f"*Overcap*: {used}; no jobs were preempted."


def _storage_lines(week: LabWeek) -> list[str]:
    if not week.growth:
        return ["*Storage*: no new disk-usage reports this week."]
    change = sum(after - before for before, after in week.growth.values())
    total = sum(after for _, after in week.growth.values())
    head = (
        f"*Storage*: {format_signed_bytes(change * 1024)} this week, "
        f"{format_bytes(total * 1024)} in all"
    )
    growers = sorted(
        ((path, after - before, after) for path, (before, after) in week.growth.items()),
        key=lambda row: -row[1],
    )
    grown = [row for row in growers if row[1] > 0][:5]
    if not grown:
        return [head + "; no directory grew."]
    lines = [head + "; grew the most:"]
    lines += [
        f"• {literal(path)} {format_signed_bytes(delta * 1024)} (now {format_bytes(now * 1024)})"
        for path, delta, now in grown
    ]
    return ["\n".join(lines)]


def _by_user(week: LabWeek, overcap: bool) -> dict[str, float]:
    hours = {u: h for (u, o), h in week.gpu_hours.items() if o == overcap and h >= MIN_HOURS_LISTED}
    return dict(sorted(hours.items(), key=_biggest))


def _biggest(item: tuple[str, float]) -> tuple[float, str]:
    return (-item[1], item[0])
