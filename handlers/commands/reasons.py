"""Slurm's pending-reason codes in words: a short phrase for `/sky jobs`, a sentence for `why`.

The codes are those of `man squeue` (JOB REASON CODES). Families such as AssocGrp*Limit are
explained from their prefix, so a code Slurm adds later still gets a sensible sentence; a code
skybot knows nothing about is shown raw rather than guessed at.
"""

from __future__ import annotations

from core.slack_text import literal

# code -> (short phrase, full explanation). The caller's values fill in {partition}, {code},
# {scancel} and {release}, each as a literal.
_KNOWN: dict[str, tuple[str, str]] = {
    "Resources": (
        "waiting for free GPUs",
        "It is waiting for resources: no node in {partition} has enough free GPUs, CPUs or "
        "memory for it right now. It starts as soon as running jobs there end.",
    ),
    "Priority": (
        "other jobs are ahead of it",
        "Jobs with higher priority are queued ahead of it in {partition}; it starts after them.",
    ),
    "BeginTime": (
        "not allowed to start yet",
        "It was submitted with a begin time (`--begin`) and may not start before it.",
    ),
    "Dependency": (
        "waiting for the jobs it depends on",
        "It waits for the jobs it depends on (`--dependency`) to finish.",
    ),
    "DependencyNeverSatisfied": (
        "will never start: its dependency failed",
        "Its dependency can never be satisfied (a job it depends on failed or was cancelled), "
        "so it will never start. Cancel it with {scancel} and resubmit.",
    ),
    "ReqNodeNotAvail": (
        "a node it needs is unavailable",
        "A node it needs is unavailable (down, drained, or reserved for maintenance).",
    ),
    "JobHeldUser": (
        "held by its owner",
        "Its owner put it on hold. Release it with {release}.",
    ),
    "JobHeldAdmin": (
        "held by an admin",
        "An admin put it on hold; only an admin can release it. Ask your lab's admin.",
    ),
    "PartitionTimeLimit": (
        "its --time is over the partition's limit",
        "Its time limit (`--time`) is longer than {partition} allows, so it will never start. "
        "Cancel it and resubmit with a shorter `--time`.",
    ),
    "PartitionNodeLimit": (
        "asks for more nodes than the partition allows",
        "It asks for more nodes than {partition} allows per job; it will not start as is.",
    ),
    "PartitionDown": (
        "the partition is down",
        "The partition {partition} is down; it waits until an admin brings it back.",
    ),
    "PartitionInactive": (
        "the partition is inactive",
        "The partition {partition} is inactive; it waits until an admin reactivates it.",
    ),
    "QOSMaxGRESPerUser": (
        "at the QOS's per-user GPU limit",
        "You already use as many GPUs as the job's QOS allows one user; it starts when one "
        "of your jobs in that QOS ends.",
    ),
    "QOSMaxWallDurationPerJobLimit": (
        "its --time is over the QOS limit",
        "Its time limit is longer than its QOS allows, so it will never start; resubmit with a "
        "shorter `--time` or another QOS.",
    ),
    "Reservation": (
        "waiting for its reservation",
        "It waits for its advanced reservation to become available.",
    ),
    "Licenses": ("waiting for a license", "It waits for a license to become available."),
    "BadConstraints": (
        "its constraints match no node",
        "Its constraints (e.g. `--constraint`) match no node, so it cannot start as is.",
    ),
    "InvalidAccount": (
        "invalid account",
        "Its account is invalid for this user or partition; cancel it and resubmit with a valid "
        "`--account`.",
    ),
    "InvalidQOS": (
        "invalid QOS",
        "Its QOS is invalid for this user or partition; cancel it and resubmit with a valid "
        "`--qos`.",
    ),
    "None": (
        "not scheduled yet",
        "Slurm has not evaluated it yet (it was just submitted); ask again in a minute.",
    ),
}

# Families explained by prefix: (prefix, short phrase, explanation).
_FAMILIES: tuple[tuple[str, str, str], ...] = (
    (
        "AssocGrp",
        "lab at its limit",
        "The lab's Slurm account has reached a group limit ({code}).",
    ),
    (
        "AssocMax",
        "at a per-user limit of the account",
        "It would exceed a per-job or per-user limit of its account ({code}).",
    ),
    (
        "QOSGrp",
        "at the QOS's group limit",
        "Its QOS has reached a group limit ({code}).",
    ),
    (
        "QOSMax",
        "at a per-user limit of the QOS",
        "It would exceed a per-user or per-job limit of its QOS ({code}).",
    ),
)


def reason_code(reason: str) -> str:
    """'ReqNodeNotAvail, UnavailableNodes:clippy' → 'ReqNodeNotAvail'."""
    return reason.split(",")[0].strip() or "None"


def is_gpu_cap(code: str) -> bool:
    """The lab's GPU cap (GrpTRES gres/gpu on its account), which `why` explains with the
    lab's live usage."""
    return code == "AssocGrpGRES"


def is_capacity(code: str) -> bool:
    """Reasons that more idle GPUs elsewhere (overcap) would get around."""
    return code.startswith(("AssocGrp", "AssocMaxGRES", "QOSGrp", "QOSMaxGRES")) or code in {
        "Resources",
        "Priority",
        "ReqNodeNotAvail",
    }


def short_reason(reason: str) -> str:
    code = reason_code(reason)
    if is_gpu_cap(code):
        return "lab at its GPU cap"
    if code in _KNOWN:
        return _KNOWN[code][0]
    for prefix, phrase, _ in _FAMILIES:
        if code.startswith(prefix):
            return phrase
    return ""


def long_reason(reason: str, partition: str, job: str) -> str | None:
    """A sentence for `why`; None when skybot has no explanation for the code."""
    code = reason_code(reason)
    if code in _KNOWN:
        return _KNOWN[code][1].format(
            partition=literal(partition),
            scancel=literal(f"scancel {job}"),
            release=literal(f"scontrol release {job}"),
        )
    for prefix, _, sentence in _FAMILIES:
        if code.startswith(prefix):
            return sentence.format(code=literal(code))
    return None
