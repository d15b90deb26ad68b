"""The slurmrestd beside the cluster under test (22.05's on this host; 24.11's when the cluster
lane runs inside its sandbox): its unix socket, its token file, and tokens minted as root."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

# Only the sandbox's rootfs has this file (deploy/testcluster-24.11.sh).
INSIDE_2411 = Path("/etc/skybot-testcluster-24.11").exists()
VERSION = "24.11" if INSIDE_2411 else "22.05"
SOCKET = f"unix:/run/skybot-slurmrestd/{VERSION}/slurmrestd.sock"
TOKEN = Path(f"/etc/skybot/slurm-{VERSION}.jwt")


def mint(path: Path, lifespan: int) -> None:
    """A token for skybot, as `deploy/testcluster.sh rest-token` writes one."""
    mint_for("skybot", path, lifespan)


def mint_for(user: str, path: Path, lifespan: int) -> None:
    """A token for `user` (minted as root: SlurmUser here), written whole then renamed."""
    out = subprocess.run(
        ["scontrol", "token", f"username={user}", f"lifespan={lifespan}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    tmp = path.with_suffix(".new")
    tmp.write_text(out)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
