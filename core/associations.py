"""Lab GPU caps and memberships from `sacctmgr -P -n show assoc format=account,user,grptres`."""

from __future__ import annotations

import re

from core.records import LabCap

_GPU_LIMIT = re.compile(r"(?:^|,)gres/gpu=(\d+)(?:,|$)")


def parse_associations(text: str) -> tuple[list[LabCap], dict[str, set[str]], list[str]]:
    """Caps (account rows), members (user rows) and a warning per unreadable line."""
    caps: list[LabCap] = []
    members: dict[str, set[str]] = {}
    warnings: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) < 3 or not parts[0]:
            warnings.append(f"sacctmgr line {number} ignored: {line[:80]!r}")
            continue
        account, user, grptres = parts[0], parts[1], parts[2]
        if user:
            members.setdefault(account, set()).add(user)
            continue
        match = _GPU_LIMIT.search(grptres)
        caps.append(LabCap(account, int(match.group(1)) if match else None))
    return caps, members, warnings
