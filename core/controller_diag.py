"""What the controller's diagnostics (sdiag, or slurmrestd's diag) tell a poll: how many
messages slurmctld still holds for slurmdbd, and the time on slurmctld's own clock.

Both come from the same answer, so the time is when that queue length was true.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.slurm_json.fields import BadField, as_number

_DBD_QUEUE = re.compile(rb"^\s*DBD Agent queue size:\s*(\d+)\s*$", re.M)
# "sdiag output at Mon Dec 07 20:28:35 2026 (1796675315)": the epoch is the controller's.
_OUTPUT_AT = re.compile(rb"^\s*sdiag output at [^(\n]*\((\d+)\)\s*$", re.M)


@dataclass(frozen=True)
class ControllerDiag:
    """None where the answer did not say."""

    dbd_queue_size: int | None
    # Epoch seconds on slurmctld's clock (whole seconds: up to 1 s before the true time).
    server_time: int | None


NOT_SAID = ControllerDiag(dbd_queue_size=None, server_time=None)


def diag_from_sdiag(shown: bytes) -> ControllerDiag:
    """From sdiag's text (the same on 22.05 and 24.11)."""
    queue = _DBD_QUEUE.search(shown)
    at = _OUTPUT_AT.search(shown)
    return ControllerDiag(
        dbd_queue_size=int(queue[1]) if queue is not None else None,
        server_time=int(at[1]) if at is not None else None,
    )


def diag_from_restd(document: object) -> ControllerDiag:
    """From slurmrestd's diag document: `statistics` with `dbd_agent_queue_size` and
    `req_time` (a plain int on 22.05's v0.0.38, a {"set", "infinite", "number"} on 24.x)."""
    statistics = document.get("statistics") if isinstance(document, dict) else None
    if not isinstance(statistics, dict):
        return NOT_SAID
    size = statistics.get("dbd_agent_queue_size")
    try:
        server_time = as_number(statistics.get("req_time"))
    except BadField:
        server_time = None
    return ControllerDiag(
        dbd_queue_size=size if type(size) is int else None,
        server_time=server_time if server_time is not None and server_time > 0 else None,
    )
