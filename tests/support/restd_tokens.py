"""slurmrestd's tokens in tests: JWTs of Slurm's shape (only slurmctld checks signatures) and token
files written whole and renamed into place, as deploy/testcluster-lib.sh writes them."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import Any


def make_token(user: str, expires: float | None = None, salt: str = "a") -> str:
    """A JWT of Slurm's shape (header.claims.signature); only slurmctld checks signatures."""

    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    claims: dict[str, Any] = {"iat": int(time.time()), "sun": user}
    if expires is not None:
        claims["exp"] = int(expires)
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.{salt}"


def write_token(path: Path, token: str) -> None:
    """As deploy/testcluster-lib.sh's write_token: whole, then renamed over the old file."""
    tmp = path.with_suffix(".new")
    tmp.write_text(f"SLURM_JWT={token}\n")
    os.replace(tmp, path)
