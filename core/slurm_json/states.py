"""Job states and exit codes, as every Slurm version writes them."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from core.records import FINAL_STATES
from core.slurm_decode import SlurmExitCode, SlurmSignal, plain_fields
from core.slurm_json.fields import BadField, Fields, as_number, as_u32

# Job base states (JOB_STATE_BASE in slurm.h).
_BASE_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "SUSPENDED",
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
    }
)
# Flags that mean "the job still holds (or is getting) its nodes". records.py treats them as
# states of their own, and 22.05's job_state_string() prints them instead of the base state,
# so newer lists like ["COMPLETED", "COMPLETING"] are mapped the same way for consistency.
_HOLDING_FLAGS = ("COMPLETING", "CONFIGURING")
# 22.05 prints some flags *instead of* the base state (job_state_string() checks flags first).
# Each maps to the base state the job is really in.
_FLAG_ONLY_STATES = {
    "REQUEUED": "PENDING",  # old run ending, job goes back to the queue
    "REQUEUE_HOLD": "PENDING",
    "REQUEUE_FED": "PENDING",
    "SPECIAL_EXIT": "PENDING",
    "RESV_DEL_HOLD": "PENDING",
    "RECONFIG_FAIL": "PENDING",
    "RESIZING": "RUNNING",
    "SIGNALING": "RUNNING",
    "STOPPED": "RUNNING",
    "UPDATE_DB": "RUNNING",
    "STAGE_OUT": "COMPLETING",
    "POWER_UP_NODE": "CONFIGURING",
    "REVOKED": "CANCELLED",
    "LAUNCH_FAILED": "FAILED",
}


# Flags that send the job back to the queue, whatever base state they come with: squeue's
# ["NODE_FAIL", "REQUEUED"] (after a controller restart) is a job about to run again.
_REQUEUE_FLAGS = frozenset({"REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"})


@lru_cache(maxsize=256)
def _known_job_state(words: tuple[str, ...], live: bool = False) -> str | None:
    """The state for a job's state words; None if none is a known state or flag.

    `live`: the words are squeue's, the job as it is now, so a requeue flag beside an end
    state means the job is going back to the queue (PENDING), not that it ended. (sacct's
    words describe one run, which did end so.)

    Cached: a queue has a handful of distinct state lists, each seen once per job.
    """
    upper = [w.upper() for w in words]
    for flag in _HOLDING_FLAGS:
        if flag in upper:
            return flag
    if live and _REQUEUE_FLAGS.intersection(upper):
        return "PENDING"
    for word in upper:
        if word in _BASE_STATES:
            return word
    for word in upper:
        if word in _FLAG_ONLY_STATES:
            return _FLAG_ONLY_STATES[word]
    return None


def job_state(value: object, fields: Fields, *, live: bool = False) -> str:
    """One state word for a job: the base state, with flags dropped.

    Exceptions, for consistency across versions: COMPLETING/CONFIGURING (resources still
    held) are reported as states, as records.ACTIVE_STATES expects, and 22.05's flag-only
    words like "REQUEUED" map to the base state the job is really in. `live` (squeue's
    record of the job now): a requeue flag makes it PENDING whatever its base state.
    """
    words: tuple[str, ...]
    if isinstance(value, str):
        words = tuple(value.split()[:1])  # "CANCELLED by 1000" is the text form; be lenient
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        words = tuple(value)
    else:
        fields.warn(f"unreadable state {value!r}")
        return "UNKNOWN"
    if not words:
        fields.warn("empty state")
        return "UNKNOWN"
    state = _known_job_state(words, live)
    if state is None:
        fields.warn(f"unknown state {value!r}")
        return words[0].upper()
    return state


# States in which Slurm itself ended the job. Accounting writes the job's exit code when Slurm
# ends it, before the batch step reports how the signal killed it, so `sacct -X -o ExitCode`
# shows 0:0 for these (seen on 22.05 for scancel and timeouts; 24.11's job-level exit is
# SUCCESS/0 too), while 22.05's squeue has already taken the step's SIGTERM (15).
_ENDED_BY_SLURM = frozenset({"CANCELLED", "TIMEOUT", "PREEMPTED", "DEADLINE"})


def _exit_from_wait_status(status: int | None) -> tuple[int | None, int | None]:
    """(exit code, signal) from a raw wait(2) status, as 22.05's squeue prints it.

    Read the way sacct prints ExitCode: a signalled status is "0:signal", anything else
    "code:0". A launch failure stores a Slurm error number here (4021 for an unwritable
    output file), which sacct, and therefore skybot, shows as 0:53.
    """
    if status is None or status < 0:
        return None, None
    signal = status & 0x7F
    if signal not in (0, 0x7F):
        return 0, signal
    return (status >> 8) & 0xFF, None


def _signal_number(value: object) -> int | None:
    n = as_number(value)
    if n is None or n == 0:
        return None
    if not 0 < n < 128:
        raise BadField(f"no such signal {n}")
    return n


def _exit_from_verbose(
    value: dict[str, Any], state: str, fields: Fields
) -> tuple[int | None, int | None]:
    """(exit code, signal) from the dict forms (sacct 22.05, everything 23.02+).

    22.05's sacct (dbv0.0.38 `_dump_job_exit_code`) tests WIFEXITED before anything else, so
    every normal exit reads {"status": "SUCCESS", "return_code": 0}, even `exit 3` (seen on
    the real test cluster). That form — status a string, not a list — therefore only proves
    exit code 0 when the job COMPLETED (or Slurm ended it); otherwise the code is unknown.
    A signalled job is "0:signal", as sacct prints it.
    """
    if isinstance(value.get("signal"), SlurmSignal):
        value = {**value, "signal": plain_fields(value["signal"])}
    status = value.get("status")
    legacy = isinstance(status, str)
    statuses = {s.upper() for s in ([status] if legacy else status or []) if isinstance(s, str)}
    if statuses & {"PENDING", "INVALID"}:
        return None, None
    try:
        code = as_u32(value.get("return_code"))
        signal_obj = value.get("signal")
        signal = None
        if isinstance(signal_obj, dict):
            signal = _signal_number(signal_obj.get("id", signal_obj.get("signal_id")))
    except BadField as exc:
        fields.warn(f"unreadable exit_code {value!r} ({exc})")
        return None, None
    if signal is not None:
        return 0, signal
    if legacy and statuses == {"SUCCESS"}:
        code = 0 if state == "COMPLETED" else None
    elif code is None and "SUCCESS" in statuses:
        code = 0
    if code is not None and code > 0xFF:
        fields.warn(f"ignoring exit code {code} (out of range)")
        code = None
    return code, None


def exit_info(value: object, state: str, fields: Fields) -> tuple[int | None, int | None]:
    """(exit code, signal) of a finished job from any version's exit_code field, as
    `sacct -X -o ExitCode` shows it."""
    if value is None or state not in FINAL_STATES:
        return None, None
    if state in _ENDED_BY_SLURM:
        return 0, None
    if isinstance(value, SlurmExitCode):
        value = plain_fields(value)
    if isinstance(value, dict) and "number" not in value:
        return _exit_from_verbose(value, state, fields)
    try:
        return _exit_from_wait_status(as_u32(value))
    except BadField:
        fields.warn(f"unreadable exit_code {value!r}")
        return None, None
