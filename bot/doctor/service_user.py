"""Running things as the service user: an admin usually runs the doctor as root, and root can
read everything the bot cannot, so checks whose answer depends on the user are run as it."""

from __future__ import annotations

import asyncio
import getpass
import os
import pwd
from collections.abc import Sequence
from dataclasses import dataclass

from bot.doctor.checklist import Check

RUNUSER = "/usr/sbin/runuser"
# For each command run as the service user (sudo -l, test -r, the runner's version).
COMMAND_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class ServiceUser:
    """Who the bot runs as; commands whose answer depends on the user are run as them."""

    name: str

    @classmethod
    def current(cls) -> ServiceUser:
        return cls(getpass.getuser())

    @property
    def is_me(self) -> bool:
        return self.name == pwd.getpwuid(os.geteuid()).pw_name

    def prefix(self) -> list[str]:
        """The argv prefix that runs a command as this user (runuser needs root)."""
        return [] if self.is_me else [RUNUSER, "-u", self.name, "--"]


async def run_command(argv: Sequence[str], timeout: float, stdin: bytes = b"") -> tuple[int, str]:
    """Run argv without a shell or a terminal, `stdin` as its input; (exit status,
    stdout+stderr). 127: cannot start."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            cwd="/",
            start_new_session=True,
        )
    except OSError as error:
        return 127, f"cannot run {argv[0]}: {error.strerror}"
    try:
        output, _ = await asyncio.wait_for(process.communicate(stdin), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        return 124, f"{argv[0]} did not answer within {timeout:g} s"
    return process.returncode or 0, output.decode(errors="replace")


def user_problem(user: ServiceUser) -> Check | None:
    """A failed check when checks as `user` are impossible from here, else None."""
    try:
        pwd.getpwnam(user.name)
    except KeyError:
        return Check(
            "service user",
            False,
            f"there is no user {user.name!r}",
            "Create the service user (e.g. `useradd --system skybot`) or pass --service-user.",
        )
    if not user.is_me and os.geteuid() != 0:
        return Check(
            "service user",
            False,
            f"running as {getpass.getuser()}, cannot check as {user.name}",
            f"Run `skybot doctor` as {user.name}, or as root with --service-user {user.name}.",
        )
    return None
