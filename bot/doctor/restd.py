"""A cluster read through slurmrestd, checked through the same source the pollers use: its
token file, the controller's ping, the nodes and the associations (lab caps)."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from bot.doctor.checklist import Check
from core.cluster_config import ClusterConfig
from scheduler.slurm.commands import SlurmCommandError
from scheduler.slurm.restd import RestdClient, RestdError
from scheduler.slurm.restd_source import RestdSource
from scheduler.slurm.restd_token import TokenFileError

TIMEOUT_SECONDS = 10.0
TOKEN_FIX = (
    "Mint a token as SlurmUser (scontrol token username=NAME lifespan=SECONDS) into the "
    'cluster\'s token_file, readable by the service user (README, "slurmrestd").'
)
RESTD_FIX = (
    "Is slurmrestd running at the cluster's url (with SLURM_JWT=daemon and auth/jwt in "
    "slurm.conf and slurmdbd.conf), and slurmctld and slurmdbd behind it?"
)


async def check_restd(cluster: ClusterConfig) -> list[Check]:
    """Token, ping, nodes and associations of `cluster`'s slurmrestd; a token that cannot be
    used is the one failure said (everything after it would fail for the same reason)."""
    timeout = min(cluster.slurm.command_timeout_seconds, TIMEOUT_SECONDS)
    client = RestdClient(cluster.url, cluster.token_file, timeout=timeout)
    source = RestdSource(client)
    try:
        try:
            token = client.token.current()
        except TokenFileError as error:
            return [Check("slurmrestd token", False, str(error), TOKEN_FIX)]
        expiry = (
            "no expiry"
            if token.expires is None
            else f"expires in {(token.expires - time.time()) / 3600:.1f} h"
        )
        checks = [Check("slurmrestd token", True, f"a token for {token.user}, {expiry}")]
        try:
            pinged = await source.answers_ping()
        except (RestdError, OSError) as error:
            pinged, why = False, str(error)
        else:
            why = "slurmctld did not answer its ping"
        if not pinged:
            return [*checks, Check("slurmrestd", False, f"{cluster.url}: {why}", RESTD_FIX)]
        checks.append(Check("slurmrestd", True, f"{cluster.url} answers; slurmctld answers ping"))
        return [*checks, await _nodes(source), await _associations(source)]
    finally:
        await source.close()


async def _nodes(source: RestdSource) -> Check:
    with tempfile.TemporaryDirectory(prefix="skybot-doctor-") as spool:
        path = Path(spool) / "nodes.json"
        try:
            await source.nodes_into(path)
            nodes = json.loads(path.read_bytes()).get("nodes") or []
        except (SlurmCommandError, ValueError) as error:
            return Check("slurmrestd nodes", False, f"reading the nodes failed: {error}", RESTD_FIX)
    return Check("slurmrestd nodes", True, f"{len(nodes)} nodes")


async def _associations(source: RestdSource) -> Check:
    try:
        caps, members, _ = await source.associations()
    except SlurmCommandError as error:
        fail = f"reading the associations (slurmdbd) failed: {error}"
        return Check("slurmrestd associations", False, fail, RESTD_FIX)
    users = sum(len(users) for users in members.values())
    return Check(
        "slurmrestd associations", True, f"{len(caps)} accounts' caps, {users} memberships"
    )
