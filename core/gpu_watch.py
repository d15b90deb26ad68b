"""GPU watches: "tell me when N GPUs of TYPE are free where I can run them" (pure functions).

A watch names a GPU type and count, and where it would run: the lab's own partition under
the lab's cap (account-wide, as Slurm enforces GrpTRES), or the preemptible overcap
partition, where only idle GPUs matter. It comes true when one node of that partition has N
idle GPUs of the type and, for a lab watch, the lab has N GPUs of headroom under its cap.
The GPUs must sit on one node because the options skybot hands out (`--nodes=1
--gpus-per-node=TYPE:N`, as `/sky template` writes) ask for exactly that.

A watch ends the first time it is true (one DM) or when it expires (one DM). Both are
decided here from the snapshot view; the watcher ends the watch and enqueues its DM in one
transaction, so GPUs that come and go between polls cannot send a second DM.

Evaluation is per poll for every active watch, so it is split: `free_index` (once per
snapshot: the most idle GPUs of each type on one node of each partition) and
`watch_outcomes` (a dictionary lookup per watch).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from core.lab_usage import IdleGpus
from core.notice_text import format_duration
from core.slack_text import literal
from core.view import ClusterView

FIRED = "free"
EXPIRED = "expired"
# `--for` as typed: 4h, 90m, 1h30m, 20s.
_DURATION = re.compile(r"(?:(\d{1,3})h)?(?:(\d{1,5})m)?(?:(\d{1,6})s)?")


@dataclass(frozen=True, slots=True)
class Watch:
    """One active watch as stored. `lab` is "" for an overcap watch."""

    id: int
    team_id: str
    user_id: str
    cluster_user: str
    gpu_type: str
    count: int
    overcap: bool
    lab: str
    partition: str
    account: str
    created_at: float
    expires_at: float

    @property
    def gres(self) -> str:
        return f"{self.gpu_type}:{self.count}" if self.gpu_type else str(self.count)


@dataclass(frozen=True, slots=True)
class Spot:
    """The most idle GPUs of one type on one node of one partition."""

    node: str
    idle: int


# (partition, GPU type) -> the node of that partition with the most idle GPUs of the type.
FreeIndex = dict[tuple[str, str], Spot]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a watch came to this poll: FIRED (with where) or EXPIRED."""

    watch: Watch
    kind: str
    spot: Spot | None = None
    headroom: int | None = None


def free_index(idle: Iterable[IdleGpus]) -> FreeIndex:
    """The best node per (partition, type), from the view's idle list (most idle first)."""
    index: FreeIndex = {}
    for item in idle:
        for partition in item.partitions:
            key = (partition, item.gpu_type)
            best = index.get(key)
            if best is None or item.count > best.idle:
                index[key] = Spot(item.node, item.count)
    return index


def view_free_index(view: ClusterView) -> FreeIndex:
    """The view's free index, worked out once per snapshot (commands and the watcher share it)."""
    return view.memo("gpu_watch_free_index", lambda: free_index(view.idle))


def headroom_by_lab(view: ClusterView) -> dict[str, int | None]:
    """Each configured lab's GPUs left under its cap (None: no cap), from the view's usage.

    Before sacctmgr has first answered, no cap is known and every lab would look uncapped:
    then no lab is listed, and no lab watch is true until the caps are read."""
    if view.snapshot.source("caps").taken_at is None:
        return {}
    return {lab.name: view.usage(lab).headroom for lab in view.labs}


def is_free(
    watch: Watch, index: Mapping[tuple[str, str], Spot], headroom: Mapping[str, int | None]
) -> Spot | None:
    """Where the watch's GPUs are free now, or None. A lab watch also needs the lab's cap
    to have room; a lab skybot no longer knows (removed from the config) never has."""
    spot = index.get((watch.partition, watch.gpu_type))
    if spot is None or spot.idle < watch.count:
        return None
    if not watch.overcap:
        if watch.lab not in headroom:
            return None
        room = headroom[watch.lab]
        if room is not None and room < watch.count:
            return None
    return spot


def watch_outcomes(
    watches: Sequence[Watch],
    index: Mapping[tuple[str, str], Spot],
    headroom: Mapping[str, int | None],
    now: float,
) -> list[Outcome]:
    """The watches that end this poll: free ones first-come first-served, then expired ones.

    Free GPUs are shared out in the watches' order (oldest first): two watches for the same
    two GPUs do not both hear they are free, the later one keeps waiting."""
    taken: dict[tuple[str, str], int] = {}
    used: dict[str, int] = {}
    outcomes: list[Outcome] = []
    for watch in watches:
        spot = is_free(watch, index, headroom)
        key = (watch.partition, watch.gpu_type)
        room = headroom.get(watch.lab)
        if spot is not None and spot.idle - taken.get(key, 0) >= watch.count:
            lab_left = None if room is None else room - used.get(watch.lab, 0)
            if watch.overcap or lab_left is None or lab_left >= watch.count:
                taken[key] = taken.get(key, 0) + watch.count
                if not watch.overcap:
                    used[watch.lab] = used.get(watch.lab, 0) + watch.count
                outcomes.append(Outcome(watch, FIRED, spot, room))
                continue
        if now >= watch.expires_at:
            outcomes.append(Outcome(watch, EXPIRED))
    return outcomes


# ---------------------------------------------------------------- what the user types and reads


def parse_duration(text: str) -> float | None:
    """Seconds of `4h`, `90m`, `1h30m`, `20s`; None if it is not such a duration."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None or not any(match.groups()):
        return None
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return float(hours * 3600 + minutes * 60 + seconds)


def sbatch_options(watch: Watch) -> str:
    """The sbatch options that use the watched GPUs now (accepted by real Slurm: tested)."""
    options = [
        f"--partition={watch.partition}",
        *([f"--account={watch.account}"] if watch.account else []),
        "--nodes=1",
        f"--gpus-per-node={watch.gres}",
    ]
    if watch.overcap:
        options.append("--requeue")
    return " ".join(options)


def template_line(watch: Watch) -> str:
    where = " --overcap" if watch.overcap else f" --lab {watch.lab}"
    return f"/sky template --gpus {watch.gres}{where}"


def where_words(watch: Watch) -> str:
    if watch.overcap:
        return f"idle on {literal(watch.partition)} (preemptible)"
    return f"under {literal(watch.lab)}'s cap on {literal(watch.partition)}"


def fired_text(outcome: Outcome, shown: str = "") -> str:
    """The one DM a watch that came true sends; `shown`, the cluster's name where skybot
    serves several."""
    watch, spot = outcome.watch, outcome.spot
    node = f" on {literal(spot.node)} ({spot.idle} idle)" if spot is not None else ""
    lines = [
        f"🟢 {watch.count} {literal(watch.gpu_type or 'gpu')} GPUs are free {where_words(watch)}"
        f"{node}{_on_cluster(shown)} (watch #{watch.id}).",
        f"Use them now: {literal(f'sbatch {sbatch_options(watch)} job.sh', 400)}",
        f"A ready script: {literal(template_line(watch), 200)}",
        "First come, first served: other jobs may take them before yours. This watch has ended.",
    ]
    if watch.overcap:
        lines.insert(3, "overcap jobs are requeued when a lab needs its GPUs: save checkpoints.")
    return "\n".join(lines)


def _on_cluster(shown: str) -> str:
    return f" on cluster {literal(shown)}" if shown else ""


def expired_text(watch: Watch, shown: str = "") -> str:
    waited = format_duration(max(0.0, watch.expires_at - watch.created_at))
    return (
        f"⌛ Your watch #{watch.id} for {literal(watch.gres)} {where_words(watch)}"
        f"{_on_cluster(shown)} ended after "
        f"{waited}: they did not come free. "
        f"{literal(f'/sky watch {watch.gres}' + (' --overcap' if watch.overcap else ''))} "
        "starts a new one."
    )


def watch_line(watch: Watch, now: float) -> str:
    left = format_duration(max(0.0, watch.expires_at - now))
    return f"#{watch.id}: {literal(watch.gres)} {where_words(watch)}, ends in {left}"
