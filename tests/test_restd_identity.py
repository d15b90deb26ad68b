"""Whose slurmrestd token skybot holds (scheduler/slurm/restd_identity.py): root's or
SlurmUser's refused at start-up (one line, exit 6) and when rotated in later; a user accounting
does not know, or a plain user behind PrivateData=jobs, said once per token. The slurmrestd
here is a local fake; tests/test_restd_cluster.py has the real daemons."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot.exit_codes import EXIT_SLURM_TOKEN_UNSAFE
from core.slurm_failure import Part, part_of
from scheduler.slurm.commands import SlurmCommandError
from scheduler.slurm.restd import RestdClient, RestdError
from scheduler.slurm.restd_identity import SlurmConfFacts, slurm_conf_facts
from scheduler.slurm.restd_source import RestdSource
from tests.support.bot_lifecycle import running
from tests.support.bot_process import free_port, start_bot
from tests.support.restd_tokens import make_token, write_token
from tests.support.slack_standin import SlackStandIn

# Accounting's users: skybot's service account is not one, as on the test clusters.
USERS: dict[str, dict[str, Any]] = {
    "alice": {"name": "alice", "administrator_level": "None"},
    "reader": {"name": "reader", "administrator_level": ["Operator"]},
}
# Who exists on the cluster: slurmctld counts anyone else's RPCs under uid 99.
EXISTING = {"skybot", "alice", "reader"}


def test_slurm_conf_says_slurmuser_and_private_jobs(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=nova\nSlurmUser=slurm\nPrivateData=accounts,jobs\n")
    assert slurm_conf_facts(str(conf)) == SlurmConfFacts("slurm", True)
    conf.write_text("ClusterName=nova\n")
    facts = slurm_conf_facts(str(conf))
    assert facts == SlurmConfFacts("root", False)  # Slurm's default SlurmUser
    assert facts.privileged == {"root"}
    assert slurm_conf_facts(str(tmp_path / "none.conf")).privileged == {"root"}


@pytest.fixture
async def restd(tmp_path: Path) -> AsyncIterator[tuple[str, list[str]]]:
    """A 24.11-shaped slurmrestd knowing USERS in accounting; the paths asked."""
    asked: list[str] = []
    counted: set[str] = set()

    async def handle(request: web.Request) -> web.Response:
        asked.append(request.path)
        user = request.headers.get("X-SLURM-USER-NAME", "")
        counted.add(user if user in EXISTING else "99")
        parts = request.path.strip("/").split("/")
        if parts[-1] == "ping":
            return web.json_response({"pings": [{"pinged": "UP"}]})
        if parts[-1] == "diag":
            by_user = [{"user": name, "count": 1} for name in sorted(counted)]
            return web.json_response({"statistics": {"rpcs_by_user": by_user}})
        if parts[-2:-1] == ["user"]:
            record = USERS.get(parts[-1])
            if record is None:  # 22.05's way: HTTP 500 "Nothing found"
                nothing = {"error_number": 9003, "description": "Nothing found"}
                return web.json_response({"errors": [nothing], "users": []}, status=500)
            return web.json_response({"users": [record]})
        if parts[-1] == "jobs":
            return web.json_response({"jobs": [], "last_update": {"number": 1_800_000_000}})
        return web.Response(status=404)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.UnixSite(runner, str(tmp_path / "restd.sock")).start()
    yield f"unix:{tmp_path}/restd.sock", asked
    await runner.cleanup()


async def test_a_token_rotated_to_root_or_slurmuser_is_refused_before_it_is_sent(
    restd: tuple[str, list[str]], tmp_path: Path
) -> None:
    address, asked = restd
    token = tmp_path / "t.jwt"
    write_token(token, make_token("skybot", time.time() + 600))
    async with RestdClient(address, token, privileged=frozenset({"root", "slurm"})) as client:
        assert (await client.jobs()).document == {"jobs": []}
        for user in ("root", "slurm"):
            write_token(token, make_token(user, time.time() + 600, salt=user))
            sent = len(asked)
            with pytest.raises(RestdError) as refused:
                await client.jobs()
            assert part_of(str(refused.value)) is Part.TOKEN_UNSAFE
            assert "acts as" in str(refused.value) or "act as any user" in str(refused.value)
            assert len(asked) == sent, "the token was sent all the same"


@pytest.mark.parametrize(
    ("user", "private_jobs", "said"),
    [
        ("ghost", False, "a user slurmctld does not know"),
        ("skybot", True, "sees only that user's jobs"),
        ("alice", True, "sees only that user's jobs"),
        ("skybot", False, None),  # not in accounting, but it exists: nothing to say
        ("reader", True, None),  # an Operator sees every job whatever PrivateData says
    ],
)
async def test_a_token_that_works_but_misleads_is_said_once(
    restd: tuple[str, list[str]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    user: str,
    private_jobs: bool,
    said: str | None,
) -> None:
    address, _ = restd
    token = tmp_path / "t.jwt"
    write_token(token, make_token(user, time.time() + 600))
    source = RestdSource(RestdClient(address, token), SlurmConfFacts("root", private_jobs))
    for _ in range(3):
        assert await source.jobs_into(tmp_path / "squeue.json")
    await source.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == ([] if said is None else [warnings[0]])
    if said is not None:
        assert said in warnings[0] and address in warnings[0] and repr(user) in warnings[0]


async def test_a_refused_token_fails_the_read_in_users_words(
    restd: tuple[str, list[str]], tmp_path: Path
) -> None:
    address, _ = restd
    token = tmp_path / "t.jwt"
    write_token(token, make_token("root", time.time() + 600))
    source = RestdSource(RestdClient(address, token), SlurmConfFacts("root", False))
    with pytest.raises(SlurmCommandError, match="slurmrestd token refused by skybot"):
        await source.jobs_into(tmp_path / "squeue.json")
    await source.close()


async def test_skybot_run_refuses_a_root_token_in_one_line_with_exit_6(tmp_path: Path) -> None:
    token = tmp_path / "nova.jwt"
    write_token(token, make_token("root", time.time() + 600))
    config = tmp_path / "skybot.toml"
    config.write_text(
        '[slack]\nmode = "socket"\n'
        f'[database]\npath = "{tmp_path}/skybot.db"\n'
        f'[metrics]\nport = {free_port()}\nhost = "127.0.0.1"\n'
        '[[clusters]]\nname = "nova"\nsource = "slurmrestd"\n'
        f'url = "unix:{tmp_path}/none.sock"\ntoken_file = "{token}"\n'
        f'slurm_conf = "{tmp_path}/no-slurm.conf"\n'
    )
    stderr = tmp_path / "stderr"
    with stderr.open("wb") as err:
        async with SlackStandIn() as slack:
            with running(start_bot(config, slack, stderr=err)) as bot:
                try:
                    code = await asyncio.to_thread(bot.wait, 60)
                except subprocess.TimeoutExpired:
                    pytest.fail("skybot run kept running with a root token")
    assert code == EXIT_SLURM_TOKEN_UNSAFE
    (line,) = stderr.read_text().splitlines()
    assert line.startswith(f"skybot: cluster nova: the slurmrestd token in {token} is for root")
    assert not (tmp_path / "skybot.db").exists()
