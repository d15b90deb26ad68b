"""Issue 27 item 1: a link code proves an account only if nobody else could have written it.

bob, let write alice's ~/.config/skybot/link by a POSIX ACL (on the file itself, or inherited
from a default ACL on her ~/.config when she followed skybot's own `mkdir -p … && echo …`),
wrote his code there and was linked as alice: the runner read only mode bits, and with an ACL
the group bits are the ACL's mask. Here with real users, real `setfacl`, and the runner installed
from this checkout, asked exactly as the bot asks it. The fixes the refusal names are run as
alice, so they are commands that work.
"""

from __future__ import annotations

import os
import pwd
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.runner_client import call_runner
from tests.support.cluster import as_user
from tests.support.link_homes import restored_config

pytestmark = [
    pytest.mark.cluster,
    # What is checked here is the runner's and the bot's, the same whatever Slurm runs beside
    # it: proven against the host's cluster. The 24.11 sandbox has no setfacl.
    pytest.mark.skipif(
        "SKYBOT_TESTCLUSTER" in os.environ, reason="inside the Slurm 24.11 sandbox: no setfacl"
    ),
]

AS_SKYBOT = ["/usr/sbin/runuser", "-u", "skybot", "--"]
LINK = "~/.config/skybot/link"
# What `/sky link alice` tells her to run.
SKYBOTS_OWN_COMMAND = "mkdir -p ~/.config/skybot && echo {code} > ~/.config/skybot/link"


async def verify(user: str, code: str) -> dict[str, Any]:
    return await call_runner(user, {"action": "verify-link", "code": code}, prefix=AS_SKYBOT)


def as_alice(command: str) -> None:
    as_user("alice", "sh", "-c", f"cd && {command}")


def bob_writes_into_alices_link(code: str) -> None:
    home = pwd.getpwnam("alice").pw_dir
    as_user("bob", "sh", "-c", f"echo {code} > {home}/.config/skybot/link")


def bob_cannot_write_into_alices_link() -> None:
    with pytest.raises(RuntimeError, match="Permission denied"):
        bob_writes_into_alices_link("BOBAGAIN")


@pytest.fixture
def alice_config(checkout_runner: None) -> Iterator[Path]:
    with restored_config("alice") as config:
        yield config


async def test_bobs_code_in_alices_file_through_a_file_acl_is_refused_with_the_fix(
    alice_config: Path,
) -> None:
    as_alice(SKYBOTS_OWN_COMMAND.format(code="ALICECODE"))
    as_alice(f"setfacl -m u:bob:rw {LINK}")
    bob_writes_into_alices_link("BOBCODE")

    reply = await verify("alice", "BOBCODE")

    assert reply["ok"] is False, reply
    assert "user bob can write ~/.config/skybot/link (ACL)" in reply["error"]
    assert reply["fix"] == ["setfacl -x u:bob ~/.config/skybot/link"]
    assert "setfacl -x u:bob ~/.config/skybot/link" in reply["error"]
    # A mask without write does not make it private: alice's next `chmod g+w` restores it.
    as_alice(f"chmod g-w {LINK}")
    assert (await verify("alice", "BOBCODE"))["ok"] is False
    # The fix as given works, and then alice's own code links her.
    as_alice(" && ".join(reply["fix"]))
    bob_cannot_write_into_alices_link()
    as_alice(f"echo ALICECODE > {LINK}")
    assert await verify("alice", "ALICECODE") == {"ok": True, "user": "alice"}


async def test_a_default_acl_inherited_through_skybots_own_command_is_refused_with_the_fix(
    alice_config: Path,
) -> None:
    # bob is in skybot-users; the group may write whatever is made in alice's ~/.config.
    as_alice("mkdir -p ~/.config && setfacl -d -m g:skybot-users:rwx ~/.config")
    as_alice(SKYBOTS_OWN_COMMAND.format(code="ALICECODE"))
    bob_writes_into_alices_link("BOBCODE")

    reply = await verify("alice", "BOBCODE")

    assert reply["ok"] is False, reply
    for who in (
        "group skybot-users can write what is made in ~/.config (default ACL)",
        "group skybot-users can write ~/.config/skybot (ACL)",
        "group skybot-users can write what is made in ~/.config/skybot (default ACL)",
        "group skybot-users can write ~/.config/skybot/link (ACL)",
    ):
        assert who in reply["error"], reply["error"]
    assert reply["fix"] == [
        "setfacl -x d:g:skybot-users ~/.config",
        "setfacl -x g:skybot-users ~/.config/skybot",
        "setfacl -x d:g:skybot-users ~/.config/skybot",
        "setfacl -x g:skybot-users ~/.config/skybot/link",
    ]
    as_alice(" && ".join(reply["fix"]))
    bob_cannot_write_into_alices_link()
    as_alice(f"echo ALICECODE > {LINK}")
    assert await verify("alice", "ALICECODE") == {"ok": True, "user": "alice"}
    # What skybot's command makes from now on is alice's alone.
    shutil.rmtree(alice_config / "skybot")
    as_alice(SKYBOTS_OWN_COMMAND.format(code="ALICECODE2"))
    assert await verify("alice", "ALICECODE2") == {"ok": True, "user": "alice"}


async def test_a_home_others_can_write_is_refused_with_the_fix(alice_config: Path) -> None:
    as_alice(SKYBOTS_OWN_COMMAND.format(code="ALICECODE"))
    home = alice_config.parent
    home.chmod(0o777)
    reply = await verify("alice", "ALICECODE")
    assert reply["ok"] is False and "everyone can write ~." in reply["error"], reply
    assert reply["fix"] == ["chmod o-w ~"]
    as_alice(" && ".join(reply["fix"]))
    # umask 002 with alice's private group: as private as 0755.
    home.chmod(0o775)
    assert await verify("alice", "ALICECODE") == {"ok": True, "user": "alice"}
