"""The runner's own copy of the contract agrees with core/runner_contract.py.

skybot-runner must stay one standard-library file, so it cannot import core; it is loaded here
as a module (nothing runs on import) and its constants compared with the bot's. A rule changed
on one side only fails here, not in a user's submission.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from core import runner_contract as contract
from core.config_schema import SubmitConfig
from handlers.commands import submit as submit_command
from store.db import open_db
from store.submissions import SubmissionRequest, enqueue
from tests.support.factories import CLUSTER

RUNNER_FILE = Path(__file__).parent.parent / "bot" / "install_files" / "skybot_runner.py"


@pytest.fixture(scope="module")
def runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("skybot_runner_under_test", RUNNER_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_runner_knows_the_same_actions_and_fields(runner: ModuleType) -> None:
    assert {*runner.ACTIONS, "version"} == set(contract.REQUEST_FIELDS)
    assert set(runner.REQUEST_KEYS) == set(contract.REQUEST_FIELDS)
    for action, fields in contract.REQUEST_FIELDS.items():
        envelope = {"action"} if action == "version" else {"action", *contract.ENVELOPE_FIELDS}
        assert runner.REQUEST_KEYS[action] == envelope | fields, action
    assert runner.CLUSTER_NAME.pattern == contract.CLUSTER_NAME.pattern


def test_the_bots_requests_are_ones_the_runner_accepts(runner: ModuleType) -> None:
    requests = [
        contract.submit_request(
            script="job.sh", options={"time": "10"}, roots=["/srv"], partitions=["a"], tag="0" * 16
        ),
        contract.submit_status_request("0" * 16, 1700000000.5),
        contract.cancel_request("123_4"),
        contract.verify_link_request("ABC123"),
        contract.tail_request("/srv/alice/slurm-1.out", max_lines=15, max_bytes=65536),
        contract.move_to_overcap_request("123", "overcap", "overcap"),
    ]
    assert {r["action"] for r in requests} == set(runner.ACTIONS)
    for request in requests:
        # The bot's client adds bot_version, and the cluster's name where it serves several.
        keys = {*request, "bot_version", "cluster"}
        assert keys <= runner.REQUEST_KEYS[request["action"]]


def test_a_cluster_name_selects_only_what_runner_toml_says(runner: ModuleType) -> None:
    config = {
        "sbatch": "/usr/bin/sbatch",
        "clusters": {"nova": {"sbatch": "/opt/nova/bin/sbatch", "slurm_conf": "/etc/nova.conf"}},
    }
    assert runner.for_cluster(config, None) is config
    nova = runner.for_cluster(config, "nova")
    assert nova["sbatch"] == "/opt/nova/bin/sbatch"
    assert nova["cluster"] == "nova"
    user = runner.pwd.getpwuid(0)
    assert runner.clean_env(user, nova)["SLURM_CONF"] == "/etc/nova.conf"
    assert "SLURM_CONF" not in runner.clean_env(user, config)
    # A name runner.toml does not list, or a path where a name belongs, is refused.
    for wrong in ("orion", "/opt/evil/bin", 7):
        with pytest.raises(runner.Refusal, match="does not know the cluster"):
            runner.for_cluster(config, wrong)


def test_the_same_sbatch_options_are_allowed(runner: ModuleType) -> None:
    assert set(runner.OPTIONS) == contract.SUBMIT_OPTIONS
    # `/sky submit` offers each of them (under its sbatch spellings) and nothing else.
    assert set(submit_command.OPTIONS.values()) == contract.SUBMIT_OPTIONS
    assert set(runner.FORBIDDEN_CHARS) == contract.FORBIDDEN_OPTION_CHARS


def test_the_submission_tag_and_job_comment_agree(runner: ModuleType, tmp_path: Path) -> None:
    assert runner.SUBMISSION_TAG.pattern == contract.SUBMISSION_TAG.pattern
    assert runner.COMMENT_PREFIX == contract.COMMENT_PREFIX
    # The store makes the tags; each must be one the runner takes.
    submission = enqueue(
        open_db(tmp_path / "s.db"),
        CLUSTER,
        SubmissionRequest("T1", "U1", "alice", "job.sh", {}),
        SubmitConfig(),
        now=1.0,
    )
    assert runner.SUBMISSION_TAG.fullmatch(submission.tag)
    assert contract.submission_comment(submission.tag) == f"skybot:{submission.tag}"


def test_job_ids_are_read_alike(runner: ModuleType) -> None:
    assert runner.JOB_ID.pattern == contract.JOB_ID.pattern
    assert runner.PLAIN_JOB_ID.pattern == contract.PLAIN_JOB_ID.pattern
