"""The JWT skybot sends to slurmrestd, read from a root-owned token file and read again when
the file changes, so that rotating the token (`deploy/testcluster.sh rest-token`, or a site's
own `scontrol token` cron job writing a new file and renaming it over the old) needs no restart.

The file holds what `scontrol token username=NAME lifespan=SECONDS` prints (`SLURM_JWT=eyJ…`)
or the bare token. The user name sent beside it (X-SLURM-USER-NAME) is the token's own `sun`
claim, so a file can never pair one user's token with another's name.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path


class TokenFileError(Exception):
    """The token file cannot be read, or holds no usable Slurm JWT."""

    def __init__(self, message: str, expired: bool = False) -> None:
        super().__init__(message)
        # The token is well formed but past its expiry (the remedy: mint a new one).
        self.expired = expired


@dataclass(frozen=True)
class SlurmToken:
    token: str
    user: str
    # Seconds since the epoch; None when the token carries no expiry.
    expires: int | None

    def headers(self) -> dict[str, str]:
        return {"X-SLURM-USER-NAME": self.user, "X-SLURM-USER-TOKEN": self.token}


def parse_token(text: str, source: str) -> SlurmToken:
    """The token in `text` (a token file's content); `source` names the file in errors."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) != 1:
        raise TokenFileError(f"{source}: expected one line with a Slurm JWT, found {len(lines)}")
    token = lines[0].removeprefix("export ").removeprefix("SLURM_JWT=").strip()
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenFileError(f"{source}: not a JWT (expected three dot-separated parts)")
    try:
        padded = parts[1] + "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(padded))
    except (binascii.Error, ValueError) as error:
        raise TokenFileError(f"{source}: the JWT's claims cannot be read: {error}") from None
    if not isinstance(claims, dict) or not isinstance(claims.get("sun"), str):
        raise TokenFileError(
            f"{source}: the JWT names no Slurm user (no 'sun' claim): mint it with "
            "`scontrol token username=NAME`"
        )
    expires = claims.get("exp")
    return SlurmToken(token, claims["sun"], expires if isinstance(expires, int) else None)


class TokenFile:
    """A token file, read again whenever its identity (inode, size, mtime) changes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._seen: tuple[int, int, int] | None = None
        self._token: SlurmToken | None = None

    def current(self) -> SlurmToken:
        """The file's token as it is now. One stat per call; the file is read only after it
        changed. An expired token is an error here, with the remedy, rather than an HTTP
        401 with none."""
        try:
            info = os.stat(self.path)
        except OSError as error:
            raise TokenFileError(
                f"cannot read the token file {self.path}: {error.strerror}"
            ) from None
        identity = (info.st_ino, info.st_size, info.st_mtime_ns)
        if self._token is None or identity != self._seen:
            try:
                text = self.path.read_text(encoding="utf-8", errors="replace")
            except OSError as error:
                raise TokenFileError(
                    f"cannot read the token file {self.path}: {error.strerror}"
                ) from None
            self._token = parse_token(text, str(self.path))
            self._seen = identity
        token = self._token
        if token.expires is not None and token.expires <= time.time():
            expired = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(token.expires))
            raise TokenFileError(
                f"the token in {self.path} expired at {expired}: mint a new one "
                "(scontrol token username=NAME lifespan=SECONDS, as SlurmUser)",
                expired=True,
            )
        return token

    def forget(self) -> None:
        """Read the file again on the next call (after the daemon refused its token)."""
        self._seen = None
