"""Which cluster user names skybot accepts: one rule for commands, the config and the runner.

The rule is the portable name `useradd` accepts by default: a lower-case letter or `_`, then
lower-case letters, digits, `_`, `.` or `-`, at most 32 characters (utmp's limit, and what
`ps` and `w` show whole). Lower case only, because Slurm's accounting lowercases user names
unless slurmdbd runs with PreserveCaseUser; typed names are folded to lower case first, so
`/sky jobs Alice` and `/sky link Alice` both mean alice. ASCII is checked before folding: the
Kelvin sign lowercases to a plain `k`, and a look-alike must not become someone's name.
Trailing-`$` machine accounts are not people and are refused.

skybot-runner needs no copy of this rule: sudo chooses the account, and the runner reads who
it is from its own uid.
"""

from __future__ import annotations

import re

CLUSTER_USER_NAME = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")


def is_cluster_user_name(name: object) -> bool:
    """Whether `name` is, exactly as given, a name skybot would act for or ask about."""
    return isinstance(name, str) and CLUSTER_USER_NAME.fullmatch(name) is not None


def cluster_user_name(typed: str) -> str | None:
    """The cluster user a person means by `typed` (case folded), or None if it cannot be one."""
    if not typed.isascii():
        return None
    name = typed.lower()
    return name if is_cluster_user_name(name) else None
