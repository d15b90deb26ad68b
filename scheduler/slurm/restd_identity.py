"""Whose token skybot holds for slurmrestd, checked at start-up and whenever the token changes.

slurmctld takes a token for SlurmUser (or root) with any X-SLURM-USER-NAME and acts as that
user (../shared/reference/slurmrestd-on-one-host.md, section 3): such a token in a file the
bot reads would be a key to every account. skybot refuses it, at start-up with one line and
an exit code (bot/startup.py), later by failing the reads until the file holds another.

Two more tokens work but mislead, and are said once per token in the log: one for a user
that does not exist (slurmctld reads for it as for nobody, uid 99, and counts its RPCs under
that number: seen on 22.05, where it still read every job), and one for a plain user where
slurm.conf's PrivateData hides other users' jobs (skybot would see only that user's). Slurm
accounting not knowing the user says nothing by itself: a service account such as skybot's
is usually not in it.

Only the standard library and the token reader here: start-up checks before it loads aiohttp.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler.slurm.restd_token import TokenFile, TokenFileError

log = logging.getLogger(__name__)

DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"
_SETTING = re.compile(r"^\s*(SlurmUser|PrivateData)\s*=\s*(\S+)", re.I | re.M)


@dataclass(frozen=True)
class SlurmConfFacts:
    """What slurm.conf says about tokens' reach; None where skybot could not read it."""

    slurm_user: str | None = None
    private_jobs: bool | None = None

    @property
    def privileged(self) -> frozenset[str]:
        """Users whose token acts as anyone: root always, and SlurmUser."""
        return frozenset({"root", self.slurm_user or "root"})


def slurm_conf_facts(path: str = "") -> SlurmConfFacts:
    """SlurmUser (default root) and whether PrivateData hides jobs, from the cluster's
    slurm.conf (`path`, else SLURM_CONF, else the default) if skybot can read it."""
    conf = Path(path or os.environ.get("SLURM_CONF", "") or DEFAULT_SLURM_CONF)
    try:
        text = conf.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return SlurmConfFacts()
    settings = {key.lower(): value for key, value in _SETTING.findall(text)}
    private = {part.lower() for part in settings.get("privatedata", "").split(",")}
    return SlurmConfFacts(settings.get("slurmuser", "root"), bool(private & {"jobs", "all"}))


def unsafe_token(user: str, token_path: Path, privileged: frozenset[str]) -> str | None:
    """Why a token for `user` must not be used, or None."""
    if user not in privileged:
        return None
    who = "root" if user == "root" else f"SlurmUser ({user})"
    return (
        f"the slurmrestd token in {token_path} is for {who}, which slurmctld lets act as any "
        "user: skybot refuses it. Mint one for a user that only reads "
        "(scontrol token username=NAME), e.g. deploy/testcluster.sh rest-token"
    )


def unsafe_token_file(token_file: str, facts: SlurmConfFacts) -> str | None:
    """At start-up: why the token now in `token_file` must not be used, or None (a file
    that cannot be read or an expired token is the polls' to report, and may be fixed
    by a rotation any moment)."""
    try:
        token = TokenFile(token_file).current()
    except TokenFileError:
        return None
    return unsafe_token(token.user, Path(token_file), facts.privileged)


def say_what_the_user_sees(
    user: str,
    token_path: Path,
    record: dict[str, Any] | None,
    rpc_users: set[str] | None,
    facts: SlurmConfFacts,
) -> str | None:
    """A warning for a token that works but misleads, or None. `record`: accounting's
    record of the user (None: accounting knows no such user, as for a service account);
    `rpc_users`: the names slurmctld counts RPCs under, asked after a read with the token
    (None: not known)."""
    if rpc_users is not None and user not in rpc_users:
        return (
            f"the slurmrestd token in {token_path} is for {user!r}, a user slurmctld does "
            "not know (it counts the token's requests under a number, as for nobody): the "
            "user does not exist on the cluster. Mint the token for a real user"
        )
    level = record.get("administrator_level") if record is not None else None
    levels = {str(item) for item in level} if isinstance(level, list) else {str(level)}
    if facts.private_jobs and not levels & {"Operator", "Administrator"}:
        return (
            f"the slurmrestd token in {token_path} is for {user!r}, a plain user, and "
            "slurm.conf's PrivateData hides other users' jobs: skybot sees only that user's "
            f"jobs. Make the user an Operator (sacctmgr modify user {user} set "
            "adminlevel=Operator) or mint the token for one"
        )
    return None
