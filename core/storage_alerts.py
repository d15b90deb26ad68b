"""When to ping a storage hoarder and when to warn that a filesystem is filling (pure functions).

Both decisions take the previous alert state and return the new state plus the messages to
post, so the caller can store both in one transaction: a decision replayed after a crash then
finds its own state and says nothing twice.

The rules are the `[notifications]` config as it is (core/config_schema.py).

Hoarding (the user guide: "we may tag you in #skynet-users when one of your directories gets
large"): a directory is flagged when it is at least `hoard_threshold_bytes` big, or among the
`hoard_top_n` largest of its lab. It is pinged once per weekly disk-usage report (key: path +
the report's `Updated` time). A newer report re-pings a directory that is still over the size
limit; a directory flagged only for being among the largest is re-pinged only once it grew by
`hoard_regrow_fraction` since the last ping, so the merely biggest are not nagged every week.

Full filesystems: each of `filesystem_thresholds` (default 90/95/98 %) warns once when
crossed upwards, stays quiet while the fill level stays above it, and is re-armed only after
the level fell `rearm_margin` points below it, so a filesystem hovering at 90 % does not flap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from core.blocks import Block, section
from core.config_schema import NotificationsConfig
from core.notice_text import format_bytes, format_signed_bytes, mention
from core.records import DirectoryUsage, FilesystemUsage
from core.slack_text import literal
from core.snapshot import ClusterSnapshot

# Directories named in a full-filesystem warning, per list (largest, fastest growing).
TOP_DIRECTORIES = 3


@dataclass(frozen=True, slots=True)
class Alert:
    """A message for the alert channel; `key` makes enqueueing it idempotent."""

    key: str
    text: str
    blocks: list[Block] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class HoardPing:
    """The report a directory was last pinged for, and its size then."""

    updated: datetime
    kib: int


@dataclass(frozen=True, slots=True)
class FillState:
    """The highest threshold still latched (0: none) and how many warnings were posted."""

    level: float = 0.0
    warnings: int = 0


# ------------------------------------------------------------------------------ hoarding


def hoarding_alerts(
    previous: Mapping[str, HoardPing],
    report: ClusterSnapshot,
    policy: NotificationsConfig,
    lab_of_root: Mapping[str, str] | None = None,
    slack_ids: Mapping[str, Sequence[str]] | None = None,
    *,
    cluster: str = "",
    shown: str = "",
) -> tuple[dict[str, HoardPing], list[Alert]]:
    """(state after this report, pings to post) for the directories in the snapshot.

    The snapshot's `previous_kib` gives the growth figure; `lab_of_root` names the lab of
    each storage root; `slack_ids` gives the Slack user ids linked to each cluster user, to
    mention them. `cluster` keys the pings (the snapshot is that cluster's); `shown` is the
    cluster's name as the text says it ("" where skybot serves one cluster).
    """
    labs = lab_of_root or {}
    ids = slack_ids or {}
    directories = report.directories
    ranks = _ranks_in_lab(directories, labs) if policy.hoard_top_n > 0 else {}
    fs_by_mount = {fs.mount: fs for fs in report.filesystems}
    state = dict(previous)
    alerts: list[Alert] = []
    for d in sorted(directories, key=lambda d: (-d.kib, d.path)):
        threshold = policy.hoard_threshold_bytes
        over = threshold > 0 and d.bytes >= threshold
        rank = ranks.get(d.path)
        ranked = rank is not None and rank <= policy.hoard_top_n
        if not (over or ranked):
            continue
        last = previous.get(d.path)
        if last is not None:
            if d.updated <= last.updated:
                continue  # this report (or an older one) was already pinged
            grew = d.kib >= last.kib * (1 + policy.hoard_regrow_fraction)
            if not over and not grew:
                continue
        state[d.path] = HoardPing(d.updated, d.kib)
        text = _hoard_text(
            d,
            _HoardReason(threshold if over else 0, rank if ranked else None, labs.get(d.root)),
            before=report.previous_kib.get(d.path),
            fs=fs_by_mount.get(d.root),
            who=mention(tuple(ids.get(d.owner, ())), d.owner),
            on=on_cluster(shown),
        )
        alerts.append(Alert(hoard_key(d, cluster), text, [section(text)]))
    return state, alerts


def hoard_key(d: DirectoryUsage, cluster: str = "") -> str:
    where = f"{cluster}:" if cluster else ""
    return f"hoard:{where}{d.path}:{d.updated.isoformat()}"


def on_cluster(shown: str) -> str:
    """ " on cluster `nova`" after a path, so two clusters' same paths are told apart; "" where
    skybot serves one cluster."""
    return f" on cluster {literal(shown)}" if shown else ""


def _ranks_in_lab(
    directories: Sequence[DirectoryUsage], lab_of_root: Mapping[str, str]
) -> dict[str, int]:
    """Each directory's place (1 = largest) among its lab's directories."""
    by_lab: dict[str, list[DirectoryUsage]] = {}
    for d in directories:
        by_lab.setdefault(lab_of_root.get(d.root, d.root), []).append(d)
    ranks: dict[str, int] = {}
    for members in by_lab.values():
        for place, d in enumerate(sorted(members, key=lambda d: (-d.kib, d.path)), start=1):
            ranks[d.path] = place
    return ranks


@dataclass(frozen=True, slots=True)
class _HoardReason:
    """Why a directory is pinged: the size mark it is over (0: none), its place among its
    lab's directories (None: not among the largest), and that lab."""

    over_bytes: int
    rank: int | None
    lab: str | None


def _hoard_text(
    d: DirectoryUsage,
    reason: _HoardReason,
    *,
    before: int | None,
    fs: FilesystemUsage | None,
    who: str,
    on: str = "",
) -> str:
    if before is None:
        growth = "first report"
    else:
        growth = f"{format_signed_bytes((d.kib - before) * 1024)} since the previous report"
    reasons = []
    if reason.over_bytes:
        reasons.append(f"over the {format_bytes(reason.over_bytes)} mark")
    if reason.rank is not None:
        place = "largest" if reason.rank == 1 else f"{_ordinal(reason.rank)} largest"
        reasons.append(f"the {place} in {literal(reason.lab or d.root)}")
    lines = [
        f"📦 {who}: {literal(d.path)}{on} holds {format_bytes(d.bytes)} ({growth}), "
        f"{' and '.join(reasons)}.",
    ]
    if fs is not None:
        lines.append(
            f"{literal(fs.mount)} is {fs.percent_used:.0f}% full with "
            f"{format_bytes(fs.avail_bytes)} free."
        )
    lines.append(
        "Please delete or move what you no longer need: data that will never be read again "
        f"can block someone else's project. (Report of {d.updated:%Y-%m-%d %H:%M}.)"
    )
    return "\n".join(lines)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# ------------------------------------------------------------------------------ full filesystems


def fill_step(
    state: FillState, percent: float, policy: NotificationsConfig
) -> tuple[FillState, float | None]:
    """One reading of a filesystem's fill level: (new state, threshold to warn about or None).

    A latched threshold is released once the level is `rearm_margin` points below it; then
    the highest threshold at or under the level is latched, warning if it is higher than what
    was latched before (a jump from 80 % to 99 % gives one warning, for 98 %).
    """
    thresholds = policy.filesystem_thresholds
    kept = [t for t in thresholds if t <= state.level and percent >= t - policy.rearm_margin]
    level = max(kept, default=0.0)
    crossed = max((t for t in thresholds if t <= percent), default=0.0)
    if crossed > level:
        return FillState(crossed, state.warnings + 1), crossed
    return FillState(level, state.warnings), None


def filesystem_alerts(
    previous: Mapping[str, FillState],
    report: ClusterSnapshot,
    policy: NotificationsConfig,
    lab_of_root: Mapping[str, str] | None = None,
    *,
    cluster: str = "",
    shown: str = "",
) -> tuple[dict[str, FillState], list[Alert]]:
    """(state after these readings, warnings to post) for every filesystem in the snapshot;
    `cluster` and `shown` as for `hoarding_alerts`."""
    state = dict(previous)
    alerts: list[Alert] = []
    for fs in sorted(report.filesystems, key=lambda f: f.mount):
        new, crossed = fill_step(previous.get(fs.mount, FillState()), fs.percent_used, policy)
        state[fs.mount] = new
        if crossed is None:
            continue
        on_it = [d for d in report.directories if d.root == fs.mount]
        lab = (lab_of_root or {}).get(fs.mount)
        text = _fill_text(
            fs, crossed, policy.filesystem_thresholds, on_it, report.previous_kib, lab, shown
        )
        where = f"{cluster}:" if cluster else ""
        key = f"fs:{where}{fs.mount}:{crossed:g}:{new.warnings}"
        alerts.append(Alert(key, text, [section(text)]))
    return state, alerts


def _fill_text(
    fs: FilesystemUsage,
    crossed: float,
    thresholds: Sequence[float],
    directories: Sequence[DirectoryUsage],
    previous_kib: Mapping[str, int],
    lab: str | None,
    shown: str = "",
) -> str:
    top = max(thresholds)
    emoji = "🔴" if crossed >= top else "🟠" if crossed > min(thresholds) else "⚠️"
    whose = f" ({literal(lab)})" if lab else ""
    lines = [
        f"{emoji} {literal(fs.mount)}{whose}{on_cluster(shown)} is {fs.percent_used:.0f}% full "
        f"(past {crossed:g}%): "
        f"{format_bytes(fs.avail_bytes)} free of {format_bytes(fs.size_bytes)}."
    ]
    largest = sorted(directories, key=lambda d: (-d.kib, d.path))[:TOP_DIRECTORIES]
    if largest:
        lines.append(
            "Largest directories: "
            + ", ".join(f"{literal(d.path)} {format_bytes(d.bytes)}" for d in largest)
            + "."
        )
    growth = sorted(
        (
            (d.kib - previous_kib[d.path], d)
            for d in directories
            if d.path in previous_kib and d.kib > previous_kib[d.path]
        ),
        key=lambda g: (-g[0], g[1].path),
    )[:TOP_DIRECTORIES]
    if growth:
        lines.append(
            "Fastest growing since the previous report: "
            + ", ".join(f"{literal(d.path)} {format_signed_bytes(kib * 1024)}" for kib, d in growth)
            + "."
        )
    lines.append("Please free space before writing more; a full filesystem fails everyone's jobs.")
    return "\n".join(lines)
