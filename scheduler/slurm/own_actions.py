"""skybot's own changes to jobs show at once: the job is read again by the next poll, which
is brought forward, instead of waiting for the poll interval (or, for a move to overcap,
which leaves the job pending, for the next listing of pending jobs' settings)."""

from __future__ import annotations

from collections.abc import Callable

from core.runner_contract import JOB_ID, RunnerCall, RunnerReply, RunnerRequest

# Runner actions that change a job in Slurm.
CHANGING_ACTIONS = frozenset({"cancel", "move-to-overcap", "submit"})


def refreshing_runner(
    runner: RunnerCall, mark_changed: Callable[[str], None], poll_soon: Callable[[], None]
) -> RunnerCall:
    """`runner`, telling the Slurm poller about each job an action changed."""

    async def call(user: str, request: RunnerRequest, /) -> RunnerReply:
        reply = await runner(user, request)
        if request.get("action") in CHANGING_ACTIONS and reply.get("ok") is True:
            job_id = reply.get("job_id", request.get("job_id"))
            if isinstance(job_id, str) and JOB_ID.fullmatch(job_id):
                mark_changed(job_id)
            poll_soon()
        return reply

    return call
