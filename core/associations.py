"""Lab GPU caps and memberships from `sacctmgr -P -n show assoc format=account,user,grptres`."""

from __future__ import annotations

import re

from core.records import LabCap

# The lab-wide GPU limit: an untyped `gres/gpu=N` item of GrpTRES. A typed limit such as
# `gres/gpu:a40=8` only caps one GPU type, not the lab, so it must not match (the "=" has to
# follow "gres/gpu" directly); nor may `gres/gpu=8M`-like values (the item ends at "," or $).
_GPU_LIMIT = re.compile(r"(?:^|,)gres/gpu=(\d+)(?:,|$)")

# Slurm's own top-level account; it is not a lab.
_ROOT_ACCOUNT = "root"


def parse_associations(text: str) -> tuple[list[LabCap], dict[str, set[str]], list[str]]:
    """Caps (account rows), members (user rows) and a warning per unreadable line.

    An account row (empty user) defines the lab's cap: None when GrpTRES has no untyped
    `gres/gpu` limit. Each account gets one cap even if several rows list it (several
    clusters may repeat it): the first row with a cap wins, else None. Rows of the `root`
    account are skipped. A trailing "|" (`-p` rather than `-P`) is accepted.
    """
    caps: dict[str, int | None] = {}
    members: dict[str, set[str]] = {}
    warnings: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = [part.strip() for part in line.split("|")]
        if len(parts) < 3 or not parts[0]:
            warnings.append(f"sacctmgr line {number} ignored: {line[:80]!r}")
            continue
        account, user, grptres = parts[0], parts[1], parts[2]
        if account == _ROOT_ACCOUNT:
            continue
        if user:
            members.setdefault(account, set()).add(user)
            continue
        match = _GPU_LIMIT.search(grptres)
        if caps.get(account) is None:
            caps[account] = int(match.group(1)) if match else None
    return [LabCap(account, cap) for account, cap in caps.items()], members, warnings
