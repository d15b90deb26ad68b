"""Lab GPU caps and memberships from `sacctmgr -P -n show assoc format=account,user,grptres`."""

from __future__ import annotations

import re
from typing import Any

from core.records import LabCap

# The lab-wide GPU limit: an untyped `gres/gpu=N` item of GrpTRES. A typed limit such as
# `gres/gpu:a40=8` only caps one GPU type, not the lab, so it must not match (the "=" has to
# follow "gres/gpu" directly); nor may `gres/gpu=8M`-like values (the item ends at "," or $).
_GPU_LIMIT = re.compile(r"(?:^|,)gres/gpu=(\d+)(?:,|$)")

# Larger is not a real limit (and would not fit the store's integers).
_MAX_CAP = 1 << 31

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
        cap = int(match.group(1)) if match else None
        if cap is not None and cap >= _MAX_CAP:
            warnings.append(f"sacctmgr line {number}: GPU limit out of range: {line[:80]!r}")
            cap = None
        if caps.get(account) is None:
            caps[account] = cap
    return [LabCap(account, cap) for account, cap in caps.items()], members, warnings


def parse_associations_json(
    document: dict[str, Any],
) -> tuple[list[LabCap], dict[str, set[str]], list[str]]:
    """The same as `parse_associations`, from `sacctmgr --json show associations` (23.02+).

    GrpTRES is `max.tres.total`, a list of {type, name, count}: the lab-wide cap is the entry
    of type "gres" named "gpu" (a typed "gpu:a40" limit caps one type, not the lab). Account
    rows have user "" (24.11 sandbox); a record that cannot be read is a warning.
    """
    caps: dict[str, int | None] = {}
    members: dict[str, set[str]] = {}
    warnings: list[str] = []
    records = document.get("associations")
    if not isinstance(records, list):
        return [], {}, ["sacctmgr: no associations list in its JSON"]
    for index, record in enumerate(records):
        account = record.get("account") if isinstance(record, dict) else None
        user = record.get("user") if isinstance(record, dict) else None
        if not isinstance(account, str) or not account or not isinstance(user, (str, type(None))):
            warnings.append(f"sacctmgr association #{index} ignored: {str(record)[:80]!r}")
            continue
        if account == _ROOT_ACCOUNT:
            continue
        if user:
            members.setdefault(account, set()).add(user)
            continue
        try:
            cap = _gpu_cap(record)
        except ValueError as error:
            warnings.append(f"sacctmgr association of {account}: {error}")
            cap = None
        if caps.get(account) is None:
            caps[account] = cap
    return [LabCap(account, cap) for account, cap in caps.items()], members, warnings


def _gpu_cap(record: dict[str, Any]) -> int | None:
    limits = record.get("max")
    tres = limits.get("tres") if isinstance(limits, dict) else None
    total = tres.get("total") if isinstance(tres, dict) else None
    if total is None:
        return None
    if not isinstance(total, list):
        raise ValueError(f"max.tres.total is not a list: {str(total)[:60]!r}")
    for item in total:
        if isinstance(item, dict) and item.get("type") == "gres" and item.get("name") == "gpu":
            count = item.get("count")
            if isinstance(count, dict):  # a {set, infinite, number} object
                count = count.get("number") if count.get("set", True) else None
            if type(count) is not int or not 0 <= count < _MAX_CAP:
                raise ValueError(f"unreadable GPU limit {str(item)[:60]!r}")
            return count
    return None
