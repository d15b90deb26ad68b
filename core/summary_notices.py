"""The one DM that stands for many: more than `MAX_SEPARATE_NOTICES` of a user's jobs ending
(or being requeued) in one poll (pure functions).

A burst comes after an accounting outage (the CLI source holds ends until sacct answers) or
when many jobs end together. The summary names its cluster (job ids repeat across clusters),
counts the jobs by how they ended, lists the first `DIGEST_LINES`, and names every failed job
with its exit code, with a "Show log" button for the first few (`/sky log JOBID` for the rest).
"""

from __future__ import annotations

from collections.abc import Sequence

from core.blocks import context, section
from core.failed_jobs import failure_lines, log_buttons, state_words
from core.job_facts import shown_label
from core.job_notices import PREEMPT_HINT, PREEMPTED, TAIL_KINDS, JobNotice
from core.records import FINAL_STATES
from core.slack_text import literal

# More notices than this for one person from one poll become a single summary DM.
MAX_SEPARATE_NOTICES = 5
DIGEST_LINES = 20
# Section text is clipped by Slack at 3,000 characters: failures get a section of their own.
_FAILURE_SECTION_CHARS = 2800

_KIND_WORDS = {PREEMPTED: "preempted", "REQUEUED": "requeued"}


def kind_words(kind: str) -> str:
    return _KIND_WORDS.get(kind, state_words(kind))


def digest_notice(
    notices: Sequence[JobNotice], key: str, cluster: str = "", buttons_cluster: str | None = None
) -> JobNotice:
    """One DM standing for many: the counts, a line per job (the first `DIGEST_LINES`),
    every failed job's exit code, and buttons to the first failed jobs' logs (whose values
    name `buttons_cluster`, as every job DM's buttons do)."""
    counts: dict[str, int] = {}
    for notice in notices:
        counts[notice.kind] = counts.get(notice.kind, 0) + 1
    summary = ", ".join(f"{n} {kind_words(k)}" for k, n in sorted(counts.items()))
    where = f" on cluster {literal(cluster)}" if cluster else ""
    lines = [f"📋 {len(notices)} of your jobs{where} changed state: {summary}."]
    for notice in notices[:DIGEST_LINES]:
        job = notice.job
        if job is None:
            continue
        lines.append(
            f"• {shown_label(job)} {literal(job.name)} on {literal(job.partition)}: "
            f"{kind_words(notice.kind)}"
        )
    if len(notices) > DIGEST_LINES:
        lines.append(f"… and {len(notices) - DIGEST_LINES} more")
    failed = [
        n for n in notices if n.job is not None and n.kind in FINAL_STATES and n.kind != "COMPLETED"
    ]
    failures = _failure_text(failed)
    hint = PREEMPT_HINT if PREEMPTED in counts else None
    text = "\n".join(lines + ([failures] if failures else []) + ([hint] if hint else []))
    blocks = [section("\n".join(lines))]
    if failures:
        blocks.append(section(failures))
    if hint:
        blocks.append(context(hint))
    with_logs = [
        (str(n.job.job_id), n.job) for n in failed if n.job is not None and n.kind in TAIL_KINDS
    ]
    blocks.extend(log_buttons(with_logs, buttons_cluster))
    return JobNotice("DIGEST", key, text, blocks)


def _failure_text(failed: Sequence[JobNotice]) -> str:
    """How each job that did not complete ended, exit codes included, grouped by job id
    ranges; array tasks by their own ids (`/sky log` takes either)."""
    ended = [(n.job.job_id, n.kind, n.job) for n in failed if n.job is not None]
    if not ended:
        return ""
    lines = failure_lines(
        ended, lambda ranges: f"job{'s' if ',' in ranges or '-' in ranges else ''} {ranges}"
    )
    text = "Did not complete:\n" + "\n".join(f"• {line}" for line in lines)
    if len(text) > _FAILURE_SECTION_CHARS:
        text = text[: _FAILURE_SECTION_CHARS - 1] + "…"
    return text + "\n`/sky log JOBID` shows any of their logs."


def _jobs_named(ranges: str) -> str:
    return f"job {ranges}" if ranges.isdigit() else f"jobs {ranges}"
