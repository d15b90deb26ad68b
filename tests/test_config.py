import subprocess
import sys
from pathlib import Path

import pytest

from bot.config import ConfigError, Secrets, load_config, parse_config

EXAMPLE = Path(__file__).parent.parent / "bot" / "install_files" / "skybot.example.toml"


def test_embedded_default_describes_the_test_cluster() -> None:
    config = load_config(None)
    assert [lab.name for lab in config.labs] == ["hoffman-lab", "kira-lab"]
    assert config.slack.alert_channel == "#skynet-users"
    assert config.lab_anywhere("HOFFMAN-LAB") == (config.default_cluster, config.labs[0])


def test_example_file_is_valid() -> None:
    config = load_config(EXAMPLE)
    assert config.labs, "the example should show how labs are configured"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"slak": {}}, "unknown config section or key: slak"),
        ({"slack": {"mod": "http"}}, "unknown config key: slack.mod"),
        ({"slack": {"mode": "carrier-pigeon"}}, "slack.mode must be 'socket' or 'http'"),
        ({"slack": {"http_port": "3000"}}, "slack.http_port must be a whole number"),
        ({"slurm": {"poll_seconds": 0}}, "slurm.poll_seconds must be greater than 0"),
        ({"labs": [{"name": "a", "account": "a"}]}, "missing config key: labs[0].partition"),
        ({"labs": {"name": "a"}}, "labs must be a list, not a table"),
        ({"slack": 3}, "slack must be a table, not a whole number"),
        ({"labs": [{"name": "a", "partition": "a", "account": "a", "x": 1}]}, "key: labs[0].x"),
        ({"database": {"history_days": 1.5}}, "database.history_days must be a whole number"),
        ({"slack": {"alert_channel": ""}}, "slack.alert_channel must not be empty"),
        ({"slurm": {"sacct_overlap_seconds": -1}}, "slurm.sacct_overlap_seconds must not be"),
        ({"metrics": {"port": 70000}}, "metrics.port must be at most 65535"),
        (
            {"labs": [{"name": "a", "partition": "a", "account": "a", "storage_roots": ["x"]}]},
            "labs[0].storage_roots: 'x' is not an absolute path",
        ),
        (
            {
                "labs": [
                    {"name": "A", "partition": "a", "account": "a"},
                    {"name": "a", "partition": "b", "account": "b"},
                ]
            },
            "labs[1].name: duplicate lab name 'a'",
        ),
        (
            {"notifications": {"token_probe_seconds": 0}},
            "notifications.token_probe_seconds must be greater than 0",
        ),
        (
            {"notifications": {"token_probe_seconds": 90}},
            "notifications.token_probe_max_seconds (60) must be at least token_probe_seconds (90)",
        ),
    ],
)
def test_bad_config_names_the_key(data: dict, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(data)
    assert message in str(error.value)


def test_missing_tokens_are_named_per_mode() -> None:
    with pytest.raises(ConfigError, match="SLACK_APP_TOKEN"):
        Secrets(bot_token="xoxb-1").require_for("socket")
    with pytest.raises(ConfigError, match="SLACK_SIGNING_SECRET"):
        Secrets(bot_token="xoxb-1").require_for("http")
    Secrets(bot_token="xoxb-1", signing_secret="s").require_for("http")


def test_secrets_never_show_in_repr() -> None:
    secrets = Secrets(bot_token="xoxb-SECRET", app_token="xapp-SECRET", signing_secret="SIGN")
    assert "SECRET" not in repr(secrets) and "SIGN" not in repr(secrets)


def _skybot(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        capture_output=True,
        text=True,
        env=env or {"PATH": "/usr/bin:/bin"},
        timeout=60,
    )


def test_run_with_broken_config_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "skybot.toml"
    bad.write_text('[slack]\nmode = "socket"\nport = 80\n')
    result = _skybot("run", "--config", str(bad))
    assert result.returncode == 2
    assert result.stderr.strip() == "skybot: config error: unknown config key: slack.port"
    assert "Traceback" not in result.stderr


def test_run_without_token_exits_2_and_never_prints_other_secrets(tmp_path: Path) -> None:
    good = tmp_path / "skybot.toml"
    good.write_text('[slack]\nmode = "socket"\n')
    env = {"PATH": "/usr/bin:/bin", "SLACK_APP_TOKEN": "xapp-TOPSECRET", "SLACK_BOT_TOKEN": ""}
    result = _skybot("run", "--config", str(good), env=env)
    assert result.returncode == 2
    assert "SLACK_BOT_TOKEN is not set" in result.stderr
    assert "TOPSECRET" not in result.stderr + result.stdout


def test_invalid_toml_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "skybot.toml"
    bad.write_text("[slack\n")
    result = _skybot("check-config", "--config", str(bad))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "is not valid TOML" in result.stderr
