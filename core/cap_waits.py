"""Telling people whose jobs wait behind their lab's GPU cap for a long time (pure functions).

A lab "at its cap" is an episode: it starts at the first poll that sees used >= cap and ends at
the first poll that does not. Each user with jobs held by the cap gets one DM per episode once
it has lasted `wait_seconds`, never more: the outbox key names the lab, the episode and the
user.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from core.lab_usage import LabUsage
from core.notice_text import format_duration, format_gpus
from core.records import Job
from core.slack_text import literal


@dataclass(frozen=True, slots=True)
class CapWaitNotice:
    key: str
    user: str
    text: str


def next_episodes(
    previous: Mapping[str, float], usages: Sequence[LabUsage], now: float
) -> dict[str, float]:
    """Lab -> when its current at-cap episode began; labs under their cap have none."""
    return {u.lab: previous.get(u.lab, now) for u in usages if u.at_cap}


def cap_wait_notices(
    episodes: Mapping[str, float],
    usages: Sequence[LabUsage],
    now: float,
    wait_seconds: float,
    idle_by_type: Mapping[str, int],
    overcap_flags: str,
) -> list[CapWaitNotice]:
    notices = []
    for usage in usages:
        since = episodes.get(usage.lab)
        if since is None or now - since < wait_seconds or not usage.pending_at_cap:
            continue
        waiting: dict[str, list[Job]] = defaultdict(list)
        for job in usage.pending_at_cap:
            waiting[job.user].append(job)
        for user, jobs in sorted(waiting.items()):
            notices.append(
                CapWaitNotice(
                    key=f"capwait:{usage.lab}:{int(since)}:{user}",
                    user=user,
                    text=_text(usage, jobs, now - since, idle_by_type, overcap_flags),
                )
            )
    return notices


def _text(
    usage: LabUsage,
    jobs: list[Job],
    waited: float,
    idle_by_type: Mapping[str, int],
    overcap_flags: str,
) -> str:
    ids = ", ".join(f"`{j.job_id}` ({format_gpus(j.gpus_by_type)})" for j in jobs[:5])
    more = f" and {len(jobs) - 5} more" if len(jobs) > 5 else ""
    noun = "job is" if len(jobs) == 1 else "jobs are"
    lines = [
        f"⏳ *{literal(usage.lab)}* has been at its GPU cap ({usage.gpus_used}/{usage.cap}) for "
        f"{format_duration(waited)}, and {len(jobs)} of your {noun} waiting for it: "
        f"{ids}{more}."
    ]
    idle = ", ".join(f"{literal(t or 'gpu')} {n}" for t, n in sorted(idle_by_type.items()) if n)
    if idle:
        lines.append(
            f"Idle GPUs right now: {idle}. Resubmitting with {literal(overcap_flags)} uses them "
            "at once, but overcap jobs can be preempted — save checkpoints."
        )
    lines.append(
        f"`/sky why {jobs[0].job_id}` explains the wait; you will not hear this again "
        "until the lab has been under its cap."
    )
    return "\n".join(lines)
