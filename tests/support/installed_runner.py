"""skybot-runner installed from this checkout for tests that call it through real sudo as real
users, the way the bot does (as the skybot service user). The fixtures `installed_runner`
(session, autouse: deploy/install-runner.sh, a site runner.toml set aside), `token` (a fresh
job name) and `alice_dir`/`bob_dir` (fresh directories under their lab storage) are imported
into the test modules that use them."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.runner_client import call_runner

REPO = Path(__file__).resolve().parents[2]
RUNNER_TOML = Path("/etc/skybot/runner.toml")
AS_SKYBOT = ["/usr/sbin/runuser", "-u", "skybot", "--"]
HOFFMAN = Path("/srv/hoffman-lab/flash9")


def sh(
    *argv: str, input: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), input=input, capture_output=True, text=True, timeout=60, env=env, check=False
    )


def cluster_problem() -> str | None:
    for user in ("alice", "bob", "carol", "skybot"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            return f"user {user} does not exist"
    if shutil.which("sbatch") is None or shutil.which("sudo") is None:
        return "sbatch or sudo is not installed"
    if sh("sinfo", "-h", "-o", "%P").returncode != 0:
        return "sinfo fails: the Slurm controller is not running"
    if not (HOFFMAN / "alice").is_dir() or not (HOFFMAN / "bob").is_dir():
        return f"{HOFFMAN}/alice and /bob are missing"
    return None


@pytest.fixture(scope="session", autouse=True)
def installed_runner() -> Iterator[None]:
    if os.geteuid() != 0:
        pytest.skip("the runner tests install a sudoers rule and act as other users: run as root")
    problem = cluster_problem()
    if problem:
        pytest.fail(f"the test cluster is not usable ({problem}); run deploy/testcluster.sh up")
    result = sh(str(REPO / "deploy" / "install-runner.sh"))
    assert result.returncode == 0, result.stderr
    # A site runner.toml would change what is allowed; tests that need one write their own.
    saved = None
    if RUNNER_TOML.exists():
        saved = RUNNER_TOML.with_name("runner.toml.skybot-test-saved")
        RUNNER_TOML.rename(saved)
    try:
        yield
    finally:
        if saved is not None:
            saved.rename(RUNNER_TOML)


async def ask(user: str, request: dict[str, Any]) -> dict[str, Any]:
    """A request exactly as the bot makes it, as the skybot service user."""
    return await call_runner(user, request, prefix=AS_SKYBOT, timeout=90)


def put(path: Path, content: str | bytes, owner: str, mode: int = 0o644) -> Path:
    data = content.encode() if isinstance(content, str) else content
    path.write_bytes(data)
    pw = pwd.getpwnam(owner)
    os.chown(path, pw.pw_uid, pw.pw_gid)
    path.chmod(mode)
    return path


def make_dir(path: Path, owner: str, mode: int = 0o755) -> Path:
    path.mkdir(mode=mode)
    pw = pwd.getpwnam(owner)
    os.chown(path, pw.pw_uid, pw.pw_gid)
    path.chmod(mode)
    return path


@pytest.fixture
def token() -> str:
    return f"skybot-test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def alice_dir(token: str) -> Iterator[Path]:
    """A fresh directory of alice's under her lab storage."""
    path = make_dir(HOFFMAN / "alice" / token, "alice")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def bob_dir(token: str) -> Iterator[Path]:
    path = make_dir(HOFFMAN / "bob" / token, "bob")
    yield path
    shutil.rmtree(path, ignore_errors=True)
