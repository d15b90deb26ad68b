"""The deployment files agree with the code: the Slack app manifest asks for exactly the scopes
the code's Web API calls need, the systemd unit verifies and keeps sudo working, and the
sudoers rule parses."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from slack_sdk.web.async_client import AsyncWebClient

from bot.cli import EXIT_CONFIG
from bot.config import DatabaseConfig, load_config
from bot.manifest import http_manifest
from bot.scopes import ALL_SCOPES, CORE_SCOPES, scopes_needed
from bot.startup import (
    EXIT_ALREADY_RUNNING,
    EXIT_DATABASE_UNUSABLE,
    EXIT_PORT_UNAVAILABLE,
    EXIT_SCHEMA_TOO_NEW,
    EXIT_SLURM_TOKEN_UNSAFE,
)
from handlers.buttons import registry

REPO = Path(__file__).resolve().parent.parent
# Shipped inside the package; `skybot install` puts them in place (tests/test_install.py).
INSTALL_FILES = REPO / "bot" / "install_files"
MANIFEST = INSTALL_FILES / "slack-app-manifest.yaml"
UNIT = INSTALL_FILES / "skybot.service"
SUDOERS = INSTALL_FILES / "skybot.sudoers"
# The code that runs in production (tests/ and benchmarks/ are not shipped).
SOURCE_DIRS = ("bot", "handlers", "scheduler", "store", "core")

# Web API method (as slack_sdk names it) -> the bot scopes it needs; () for none. A method the
# code starts calling that is not listed here fails test_every_api_call_has_a_known_scope.
METHOD_SCOPES: dict[str, tuple[str, ...]] = {
    # To a channel the bot is in, or to a user id (lands in the app's DM: no im:write needed).
    "chat_postMessage": ("chat:write",),
    "chat_postEphemeral": ("chat:write",),
    "chat_update": ("chat:write",),
    "chat_delete": ("chat:write",),
    "conversations_open": ("im:write",),
    # skybot reads the history of its own DMs only (scheduler/outbox_recheck.py).
    "conversations_history": ("im:history",),
    # skybot asks only about channels (the alert channel), never about DMs (im:/mpim:read).
    "conversations_info": ("channels:read", "groups:read"),
    "conversations_list": ("channels:read", "groups:read"),
    "conversations_members": ("channels:read", "groups:read", "im:read", "mpim:read"),
    "conversations_join": ("channels:join",),
    "users_info": ("users:read",),
    "users_list": ("users:read",),
    "users_lookupByEmail": ("users:read.email",),
    "views_publish": (),  # needs no scope, but the manifest must enable the Home tab
    "views_open": (),
    "files_upload_v2": ("files:write",),
    "files_uploadV2": ("files:write",),
    "reactions_add": ("reactions:write",),
    # No bot scope: auth.test works with any token; apps.connections.open uses the app-level
    # token (xapp-, connections:write), which is not part of oauth_config.
    "auth_test": (),
    "apps_connections_open": (),
}
# Scopes that reading a field of an answer needs, on top of the method's own.
FIELD_SCOPES: dict[str, tuple[str, ...]] = {
    # users.info only includes profile.email with users:read.email (handlers/identity.py).
    r"""\.get\(["']email["']\)|\[["']email["']\]""": ("users:read.email",),
}
# systemd options that set, or for a service with User= imply, NoNewPrivileges=yes
# (systemd.exec(5)), or otherwise stop a setuid sudo from becoming root.
BREAKS_SUDO = (
    "NoNewPrivileges",
    "SystemCallFilter",
    "SystemCallArchitectures",
    "SystemCallLog",
    "RestrictAddressFamilies",
    "RestrictNamespaces",
    "RestrictSUIDSGID",
    "RestrictRealtime",
    "RestrictFileSystems",
    "LockPersonality",
    "MemoryDenyWriteExecute",
    "PrivateDevices",
    "ProtectKernelTunables",
    "ProtectKernelModules",
    "ProtectKernelLogs",
    "ProtectClock",
    "ProtectHostname",
    "DynamicUser",
    "PrivateUsers",
    "CapabilityBoundingSet",
    "AmbientCapabilities",
    "SecureBits",
)


def source_text() -> dict[Path, str]:
    return {
        path: path.read_text(encoding="utf-8")
        for directory in SOURCE_DIRS
        for path in sorted((REPO / directory).rglob("*.py"))
    }


def web_api_methods() -> set[str]:
    return {name for name in vars(AsyncWebClient) if not name.startswith("_")}


def api_calls() -> dict[str, list[str]]:
    """Web API methods called in the production code -> where (path:line)."""
    methods = web_api_methods()
    found: dict[str, list[str]] = {}
    for path, text in source_text().items():
        for number, line in enumerate(text.splitlines(), 1):
            for name in re.findall(r"\.([A-Za-z_][A-Za-z0-9_]*)\(", line):
                if name in methods or name == "api_call":
                    found.setdefault(name, []).append(f"{path.relative_to(REPO)}:{number}")
    return found


def required_scopes() -> dict[str, list[str]]:
    """Bot scopes the code needs -> why."""
    needed: dict[str, list[str]] = {}
    calls = api_calls()
    for method, places in calls.items():
        for scope in METHOD_SCOPES.get(method, ()):
            needed.setdefault(scope, []).append(f"{method} at {places[0]}")
    if "users_info" in calls:
        for path, text in source_text().items():
            for pattern, scopes in FIELD_SCOPES.items():
                if re.search(pattern, text):
                    for scope in scopes:
                        needed.setdefault(scope, []).append(f"{pattern} in {path.name}")
    if any("@app.command(" in text for text in source_text().values()):
        needed.setdefault("commands", []).append("@app.command")
    return needed


def listeners(kind: str) -> list[str]:
    """Arguments of every `@app.<kind>(...)` decorator in the production code."""
    pattern = re.compile(rf"@app\.{kind}\(\s*([^)]*)\)")
    return [m.group(1) for text in source_text().values() for m in pattern.finditer(text)]


def event_names() -> list[str]:
    """The event types `@app.event(...)` listeners handle."""
    return [e.strip("\"' ") for e in listeners("event")]


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    data = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


# ----------------------------------------------------------------------------- the manifest


# Where api_call is passed on, not called: LimitedClient.api_call waits for its method's turn
# and calls the SDK's with the method it was given (every method above goes through it).
FORWARDS_API_CALL = "scheduler/slack_limits.py:"


def test_every_api_call_has_a_known_scope() -> None:
    calls = api_calls()
    hidden = [at for at in calls.pop("api_call", []) if not at.startswith(FORWARDS_API_CALL)]
    assert not hidden, f"api_call hides the method from this test: {hidden}"
    unknown = {m: places for m, places in calls.items() if m not in METHOD_SCOPES}
    assert not unknown, f"add these Web API methods to METHOD_SCOPES: {unknown}"
    # The scan does see the calls the bot is known to make.
    assert {"chat_postMessage", "users_info"} <= set(calls)


def test_manifest_bot_scopes_are_exactly_what_the_code_uses(manifest: dict[str, Any]) -> None:
    scopes = manifest["oauth_config"]["scopes"]["bot"]
    assert len(scopes) == len(set(scopes)), "duplicate scopes"
    needed = required_scopes()
    assert set(scopes) == set(needed), (
        f"manifest has {sorted(scopes)}, the code needs {sorted(needed)}: {needed}"
    )
    assert "user" not in manifest["oauth_config"]["scopes"], "skybot uses no user token"


def test_manifest_bot_scopes_are_the_ones_the_doctor_checks(manifest: dict[str, Any]) -> None:
    """bot/scopes.py is what `skybot doctor` holds the token to: the shipped manifest lists
    every scope some configuration needs, and is rendered down to one configuration's."""
    assert sorted(manifest["oauth_config"]["scopes"]["bot"]) == sorted(ALL_SCOPES)


@pytest.mark.parametrize(
    ("toml", "wanted"),
    [
        ("", {*CORE_SCOPES, "channels:read", "groups:read"}),
        ('[identity]\nemail_domain = "example.edu"\n', set(ALL_SCOPES)),
        ("[slack]\ndoctor_checks_alert_channel = false\n", set(CORE_SCOPES)),
    ],
)
def test_show_manifest_asks_only_for_what_the_config_uses(
    tmp_path: Path, toml: str, wanted: set[str]
) -> None:
    """`users:read(.email)` only for the email rule, `channels:read`/`groups:read` only for
    the doctor's alert-channel check (issue 28: they were requested always)."""
    config = tmp_path / "skybot.toml"
    config.write_text(toml)
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli", "show", "manifest", "--config", str(config)],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    rendered = yaml.safe_load(result.stdout)
    assert set(rendered["oauth_config"]["scopes"]["bot"]) == wanted
    assert {s: w for s, w in scopes_needed(load_config(config)).items()}.keys() == wanted


def test_manifest_socket_mode_and_settings(manifest: dict[str, Any]) -> None:
    settings = manifest["settings"]
    assert settings["socket_mode_enabled"] is True
    assert settings["org_deploy_enabled"] is False
    assert settings["token_rotation_enabled"] is False
    # Exactly the events a listener handles (Socket Mode: no request_url).
    events = event_names()
    subscriptions = settings.get("event_subscriptions", {}).get("bot_events", [])
    assert sorted(subscriptions) == sorted(events), (subscriptions, events)
    assert "request_url" not in settings.get("event_subscriptions", {})
    interactive = any(listeners(kind) for kind in ("action", "view", "shortcut", "options"))
    assert settings.get("interactivity", {}).get("is_enabled", False) is interactive


def test_manifest_slash_command(manifest: dict[str, Any]) -> None:
    commands = manifest["features"]["slash_commands"]
    assert [c["command"] for c in commands] == ["/sky"]
    assert [c.strip("\"' ") for c in listeners("command")] == ["/sky"]
    sky = commands[0]
    # Mentions must arrive as <@U…|name> to be resolved (handlers/slack_input.py).
    assert sky["should_escape"] is True
    assert sky["description"] and sky["usage_hint"]
    assert "url" not in sky  # Socket Mode: commands arrive over the websocket


def test_manifest_app_home_and_display(manifest: dict[str, Any]) -> None:
    features = manifest["features"]
    assert features["bot_user"]["display_name"]
    home = features["app_home"]
    # DMs are posted to user ids, which needs the Messages tab.
    assert home["messages_tab_enabled"] is True
    # The Home tab is published (views.publish) when a user opens it (app_home_opened).
    publishes = "views_publish" in api_calls()
    assert publishes is ("app_home_opened" in event_names())
    assert home["home_tab_enabled"] is publishes
    # Nobody reads what users write there (no message listener).
    assert home.get("messages_tab_read_only_enabled") is not listeners("message")
    info = manifest["display_information"]
    assert info["name"]
    assert 0 < len(info["description"]) <= 140
    assert 175 <= len(info.get("long_description", "x" * 175)) <= 4000
    assert re.fullmatch(r"#[0-9a-fA-F]{6}", info.get("background_color", "#000000"))


# ---------------------------------------------------------------------------- the systemd unit


def unit_settings() -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in UNIT.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def test_unit_keeps_sudo_working() -> None:
    settings = unit_settings()
    present = sorted(set(settings) & set(BREAKS_SUDO))
    assert not present, f"these stop sudo in a User= service: {present}"
    # sudo's child (the runner) is in the unit's mount namespace and reads users' homes.
    assert settings["ProtectHome"] == ["no"]
    assert settings["ProtectSystem"] == ["full"]


def test_unit_runs_skybot_as_its_own_user() -> None:
    settings = unit_settings()
    assert settings["User"] == ["skybot"]
    assert settings["Group"] == ["skybot"]
    assert settings["ExecStart"] == ["/opt/skybot/bin/skybot run --config /etc/skybot/skybot.toml"]
    assert settings["EnvironmentFile"] == ["/etc/skybot/skybot.env"]
    assert settings["Restart"] == ["on-failure"]
    assert "RestartSec" in settings
    assert settings["PrivateTmp"] == ["yes"]
    # /var/lib/skybot, where the config's default database lives.
    assert settings["StateDirectory"] == ["skybot"]
    assert Path(DatabaseConfig().path).parent == Path("/var/lib/skybot")


def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is missing: deploy/dev-setup.sh installs systemd")
    # verify checks that ExecStart's program exists; /opt/skybot/bin/skybot does only on a real
    # install, so a copy of the unit points at this environment's skybot (or python) instead.
    program = shutil.which("skybot") or shutil.which("python3")
    assert program is not None
    copy = tmp_path / UNIT.name
    text = UNIT.read_text(encoding="utf-8")
    assert "ExecStart=/opt/skybot/bin/skybot " in text
    copy.write_text(text.replace("ExecStart=/opt/skybot/bin/skybot ", f"ExecStart={program} "))
    result = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    # A warning (an unknown key, a key in the wrong section) exits 0 but prints a line.
    assert result.returncode == 0 and not result.stderr.strip() and not result.stdout.strip(), (
        result.stdout + result.stderr
    )


# --------------------------------------------------------------------------------- sudoers


def test_sudoers_file_parses() -> None:
    visudo = shutil.which("visudo", path="/usr/sbin:/sbin:/usr/bin:/bin")
    if visudo is None:
        pytest.fail("visudo is missing: deploy/dev-setup.sh installs sudo")
    result = subprocess.run(
        [visudo, "-cf", str(SUDOERS)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_unit_does_not_restart_what_a_restart_cannot_fix() -> None:
    settings = unit_settings()
    prevented = settings["RestartPreventExitStatus"][0].split()
    refusals = [
        EXIT_CONFIG,
        EXIT_ALREADY_RUNNING,
        EXIT_SCHEMA_TOO_NEW,
        EXIT_DATABASE_UNUSABLE,
        EXIT_SLURM_TOKEN_UNSAFE,
    ]
    assert sorted(prevented) == sorted(str(code) for code in refusals)
    assert str(EXIT_PORT_UNAVAILABLE) not in prevented  # a port may free up
    # skybot tells systemd when it is up, and its heartbeat feeds the watchdog.
    assert settings["Type"] == ["notify"]
    assert "WatchdogSec" in settings


def action_ids() -> set[str]:
    return set(registry.ACTION_IDS)


def test_buttons_are_registered_in_one_place_only() -> None:
    """Every `app.action(...)` of the production code is the registry's: one listener per
    button of `BUTTONS` and the catch-all; tests/test_button_registry.py checks that every
    button built has one."""
    calls = {
        path.relative_to(REPO).as_posix(): len(re.findall(r"\bapp\.action\(", text))
        for path, text in source_text().items()
    }
    assert {path: n for path, n in calls.items() if n} == {"handlers/buttons/registry.py": 2}
    assert len(listeners("action")) == 1  # the catch-all; the buttons' go in a loop
    assert tuple(b.kind.pattern for b in registry.BUTTONS) == registry.ACTION_PATTERNS
    for button in registry.BUTTONS:
        assert button.kind.pattern.pattern.startswith(f"^{button.kind.stem}")
        assert not registry.ANY_ACTION.pattern.startswith(f"^{button.kind.stem}")


def test_interactivity_is_on_when_there_are_buttons(manifest: dict[str, Any]) -> None:
    assert manifest["settings"]["interactivity"]["is_enabled"] is bool(action_ids())


def test_the_manifest_for_http_mode_sends_everything_to_skybot(manifest: dict[str, Any]) -> None:
    """Socket Mode by default; `skybot show manifest --http-url URL` for HTTP mode: Socket
    Mode off, and the slash command, the button clicks and the events all sent to URL."""
    url = "https://skybot.example.org/slack/events"
    http = yaml.safe_load(http_manifest(MANIFEST.read_text(encoding="utf-8"), url))
    for mode in (manifest, http):
        assert mode["settings"]["interactivity"]["is_enabled"] is bool(action_ids())
        assert mode["oauth_config"] == manifest["oauth_config"]
        assert mode["features"]["app_home"] == manifest["features"]["app_home"]
    assert manifest["settings"]["socket_mode_enabled"] is True
    assert "request_url" not in manifest["settings"]["interactivity"]
    assert http["settings"]["socket_mode_enabled"] is False
    assert http["settings"]["interactivity"]["request_url"] == url
    assert http["settings"]["event_subscriptions"]["request_url"] == url
    assert [c["url"] for c in http["features"]["slash_commands"]] == [url]
    assert sorted(http["settings"]["event_subscriptions"]["bot_events"]) == sorted(event_names())
    for bad in ("http://skybot.example.org/slack/events", "https://x y", "https://a\nb: c"):
        with pytest.raises(ValueError, match="not an https URL"):
            http_manifest(MANIFEST.read_text(encoding="utf-8"), bad)
