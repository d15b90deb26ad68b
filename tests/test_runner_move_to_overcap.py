"""skybot-runner's move-to-overcap refuses a bad request before it runs any Slurm command.

The runner is loaded as a module (nothing runs on import) and its action called directly, with
squeue and scontrol pointing at a path that does not exist: a request that got as far as
Slurm would fail as a broken installation (InternalError), not as the refusal asserted here.
What Slurm itself decides (another user's job, a running job) is tested through sudo on the
real cluster in tests/test_runner.py.
"""

from __future__ import annotations

import importlib.util
import pwd
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

RUNNER_FILE = Path(__file__).parent.parent / "bot" / "install_files" / "skybot_runner.py"
NO_SLURM = {"squeue": "/nonexistent/squeue", "scontrol": "/nonexistent/scontrol"}
ALICE = pwd.struct_passwd(("alice", "x", 1001, 1001, "", "/home/alice", "/bin/bash"))


@pytest.fixture(scope="module")
def runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("skybot_runner_overcap", RUNNER_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def refusal(runner: ModuleType, request: dict[str, Any], config: dict[str, Any]) -> str:
    with pytest.raises(runner.Refusal) as refused:
        runner.do_move_to_overcap(request, ALICE, {**NO_SLURM, **config})
    return str(refused.value)


@pytest.mark.parametrize(
    "job_id", ["123_4", "123+0", "12;id", "-1", "1 2", "", "12\n", "--user=bob", True, None, 1.5]
)
def test_only_a_plain_job_id_is_taken(runner: ModuleType, job_id: Any) -> None:
    request = {"job_id": job_id, "partition": "overcap", "account": "overcap"}
    assert refusal(runner, request, {}) == (
        "job_id must be a plain job number like 123 (not an array task)."
    )


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"partition": None}, "'partition' must name the overcap partition"),
        ({"partition": "overcap,hoffman-lab"}, "'partition' must name the overcap partition"),
        ({"partition": "overcap Account=root"}, "'partition' must name the overcap partition"),
        ({"account": "overcap QOS=high"}, "'account' must name the overcap account"),
        ({"account": ["overcap"]}, "'account' must name the overcap account"),
    ],
)
def test_bad_partition_or_account_is_refused(
    runner: ModuleType, fields: dict[str, Any], says: str
) -> None:
    request = {"job_id": "123", "partition": "overcap", "account": "overcap", **fields}
    assert refusal(runner, request, {}).startswith(says)


def test_the_sites_runner_toml_wins_over_the_request(runner: ModuleType) -> None:
    asked = {"partition": "hoffman-lab", "account": "hoffman-lab"}
    pinned = {"overcap_partition": "overcap", "overcap_account": "overcap"}
    assert runner.overcap_target(asked, pinned) == ("overcap", "overcap")
    assert runner.overcap_target(asked, {}) == ("hoffman-lab", "hoffman-lab")
    # A site whose overcap partition needs no account of its own: the job keeps its account.
    assert runner.overcap_target(asked, {"overcap_account": ""}) == ("hoffman-lab", None)
    assert runner.overcap_target({"partition": "overcap", "account": None}, {}) == (
        "overcap",
        None,
    )


def test_a_valid_request_reaches_slurm(runner: ModuleType) -> None:
    """The control for the refusals above: with nothing wrong, the runner runs squeue."""
    request = {"job_id": "123", "partition": "overcap", "account": "overcap"}
    with pytest.raises(runner.InternalError, match="/nonexistent/squeue is not installed"):
        runner.do_move_to_overcap(request, ALICE, NO_SLURM)
