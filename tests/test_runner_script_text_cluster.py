"""The runner's submit of a script's text (the job form, issue 43), as the bot makes it: real
sudo, the real runner installed from this checkout, the real cluster. The text reaches sbatch on
its standard input, run as the user, from the working directory the request names (checked as
a script file's directory is); no script file is written anywhere. Old requests (a script
path) are unchanged: tests/test_runner.py."""

from __future__ import annotations

import pwd
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.runner_client import call_runner
from tests.support.cluster import wait_for

pytestmark = pytest.mark.cluster

AS_SKYBOT = ["/usr/sbin/runuser", "-u", "skybot", "--"]
HOFFMAN = Path("/srv/hoffman-lab/flash9")
ROOTS = [str(HOFFMAN), "/srv/kira-lab/share4"]
PARTITIONS = ["hoffman-lab", "kira-lab", "debug", "overcap"]


@pytest.fixture
def token() -> str:
    return f"skybot-form-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def workdir(token: str, checkout_runner: None, clean_queue: None) -> Iterator[Path]:
    path = HOFFMAN / "alice" / token
    path.mkdir()
    entry = pwd.getpwnam("alice")
    shutil.chown(path, entry.pw_uid, entry.pw_gid)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _script(token: str, body: str) -> str:
    return f"#!/bin/bash\n#SBATCH --job-name={token}\n#SBATCH --time=2\n{body}\n"


def _request(text: str | None, where: str | None, **extra: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "action": "submit",
        "options": {"partition": "debug", "account": "hoffman-lab"},
        "roots": ROOTS,
        "partitions": PARTITIONS,
        **extra,
    }
    if text is not None:
        request["script_text"] = text
    if where is not None:
        request["workdir"] = where
    return request


async def _ask(request: dict[str, Any]) -> dict[str, Any]:
    return await call_runner("alice", request, prefix=AS_SKYBOT, timeout=90)


def _jobs_named(name: str) -> list[str]:
    done = subprocess.run(
        ["squeue", "-h", "-a", "-n", name, "-o", "%i"], capture_output=True, text=True, timeout=30
    )
    return done.stdout.split()


async def test_a_scripts_text_runs_as_the_user_in_its_directory(workdir: Path, token: str) -> None:
    home = Path(pwd.getpwnam("alice").pw_dir)
    before = sorted(p.name for p in home.iterdir())
    reply = await _ask(_request(_script(token, "whoami > out.txt\npwd >> out.txt"), str(workdir)))
    assert reply["ok"] is True, reply
    assert reply["script"] == str(workdir) and isinstance(reply["job_id"], int)
    assert _jobs_named(token) == [str(reply["job_id"])]
    out = workdir / "out.txt"
    await wait_for(lambda: out.exists() and out.read_text().count("\n") >= 2, 60, "its output")
    assert out.read_text().splitlines() == ["alice", str(workdir)]
    assert out.stat().st_uid == pwd.getpwnam("alice").pw_uid
    # No script file: sbatch read the text on stdin; the home is as it was.
    assert {p.name for p in workdir.iterdir()} <= {"out.txt", f"slurm-{reply['job_id']}.out"}
    assert sorted(p.name for p in home.iterdir()) == before


async def test_a_tilde_directory_is_the_users_own_home(token: str, checkout_runner: None) -> None:
    text = _script(token, "true").replace("--time=2", "--time=2\n#SBATCH --output=/dev/null")
    reply = await _ask(_request(text, "~"))
    assert reply["ok"] is True, reply
    assert reply["script"] == pwd.getpwnam("alice").pw_dir
    subprocess.run(["scancel", str(reply["job_id"])], timeout=30, check=False)


@pytest.mark.parametrize(
    ("text", "where", "extra", "said"),
    [
        ("", "WORKDIR", {}, "empty"),
        ("#!/bin/bash\n\0true\n", "WORKDIR", {}, "NUL"),
        ("#!/bin/bash\n" + "#" * 5000 + "\n", "WORKDIR", {"max_script_bytes": 4096}, "4096"),
        ("#!/bin/bash\ntrue\n", "/tmp", {}, "outside the places"),
        ("#!/bin/bash\ntrue\n", "WORKDIR/../../bob", {}, "'..'"),
        ("#!/bin/bash\ntrue\n", "relative/dir", {}, "absolute path or start with ~/"),
        ("#!/bin/bash\ntrue\n", "WORKDIR/missing", {}, "Cannot open the directory"),
        ("#!/bin/bash\ntrue\n", None, {}, "absolute path or start with ~/"),
        (None, "WORKDIR", {}, "empty"),
        ("#!/bin/bash\ntrue\n", "WORKDIR", {"script": "/etc/passwd"}, "not both"),
    ],
)
async def test_bad_texts_and_directories_are_refused_and_nothing_runs(
    workdir: Path,
    token: str,
    text: str | None,
    where: str | None,
    extra: dict[str, Any],
    said: str,
) -> None:
    place = where.replace("WORKDIR", str(workdir)) if where is not None else None
    body = (
        text.replace("#!/bin/bash\n", f"#!/bin/bash\n#SBATCH --job-name={token}\n")
        if text
        else text
    )
    reply = await _ask(_request(body, place, **extra))
    assert reply["ok"] is False and said in reply["error"], reply
    assert _jobs_named(token) == []
