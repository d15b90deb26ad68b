"""skybot's own changes to jobs show at once: the job is read again by the next poll, which
is brought forward, instead of waiting for the poll interval (or, for a move to overcap,
which leaves the job pending, for the next listing of pending jobs' settings)."""

from __future__ import annotations

from collections.abc import Callable

from core.runner_contract import JOB_ID, RunnerCall, RunnerReply, RunnerRequest
from core.runner_replies import CHANGES, Refused, Submitted


def refreshing_runner(
    runner: RunnerCall, mark_changed: Callable[[str], None], poll_soon: Callable[[], None]
) -> RunnerCall:
    """`runner`, telling the Slurm poller about each job an action changed."""

    async def call(user: str, request: RunnerRequest, /) -> RunnerReply:
        reply = await runner(user, request)
        decode = CHANGES.get(str(request.get("action")))
        changed = decode(reply) if decode is not None else None
        if changed is not None and not isinstance(changed, Refused):
            # A new job (submit) is in the next poll anyway; a changed one is read again.
            if not isinstance(changed, Submitted) and JOB_ID.fullmatch(changed.job_id):
                mark_changed(changed.job_id)
            poll_soon()
        return reply

    return call
