"""Slack: the tokens are set and accepted, the bot token has its scopes, the alert channel
exists with the bot in it, and Socket Mode accepts the app token."""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Config, ConfigError, Secrets
from bot.doctor.checklist import Check
from bot.scopes import scopes_needed

SLACK_TIMEOUT_SECONDS = 15.0


def check_token_presence(config: Config, secrets: Secrets) -> Check:
    mode = config.slack.mode
    try:
        secrets.require_for(mode)
    except ConfigError as error:
        return Check(
            "tokens",
            False,
            str(error),
            "Set it in the service's environment (e.g. an EnvironmentFile for the systemd "
            "unit), then run the doctor in that same environment.",
        )
    names = ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN" if mode == "socket" else "SLACK_SIGNING_SECRET"]
    return Check("tokens", True, f"{' and '.join(names)} are set ({mode} mode)")


def _slack_error(error: Exception) -> str:
    """What went wrong, in words: Slack's error code, or why Slack could not be reached."""
    if isinstance(error, SlackApiError):
        return str(error.response.get("error") or f"HTTP {error.response.status_code}")
    if isinstance(error, TimeoutError):
        return f"no answer within {SLACK_TIMEOUT_SECONDS:g} s"
    if isinstance(error, aiohttp.ClientConnectorError):
        code = error.os_error.errno
        reason = os.strerror(code) if code else str(error.os_error)
        return f"cannot connect to {error.host}:{error.port} ({reason})"
    if isinstance(error, aiohttp.ClientError | OSError):
        return f"cannot reach Slack ({type(error).__name__}: {error})"
    return type(error).__name__


def _unreachable(error: Exception) -> bool:
    """Slack was never asked: the fix is the network, not a token or a setting."""
    return isinstance(error, TimeoutError | aiohttp.ClientError | OSError)


NETWORK_FIX = (
    "Check that this host reaches the Slack API (DNS, firewall, and HTTPS_PROXY if the node "
    "needs a proxy; SLACK_API_URL if set), e.g. `curl -sI https://slack.com/api/api.test`."
)


def _header(headers: object, name: str) -> str | None:
    """A response header, case-insensitively (slack_sdk hands on aiohttp's headers)."""
    items = headers.items() if hasattr(headers, "items") else []
    return next((str(v) for k, v in items if str(k).lower() == name), None)


async def check_bot_token(config: Config, secrets: Secrets) -> list[Check]:
    """auth.test with the bot token, then its scopes from the x-oauth-scopes header."""
    from bot.app import web_client

    client = web_client(secrets)
    try:
        response = await asyncio.wait_for(client.auth_test(), SLACK_TIMEOUT_SECONDS)
    except Exception as error:  # any failure is the check's answer
        code = _slack_error(error)
        fix = (
            NETWORK_FIX
            if _unreachable(error)
            else "SLACK_BOT_TOKEN is wrong or revoked: copy the Bot User OAuth Token (xoxb-…) "
            "from the app's OAuth & Permissions page."
            if code in ("invalid_auth", "not_authed", "token_revoked", "account_inactive")
            else f"Slack refused auth.test ({code}): see api.slack.com/methods/auth.test."
        )
        return [Check("slack auth", False, f"auth.test failed: {code}", fix)]
    auth = Check(
        "slack auth",
        True,
        f"auth.test OK: bot {response.get('user')!r} in team {response.get('team')!r}",
    )
    return [auth, _scope_check(config, _header(response.headers, "x-oauth-scopes"))]


def _scope_check(config: Config, header: str | None) -> Check:
    needed = scopes_needed(config)
    if header is None:
        return Check(
            "slack scopes",
            True,
            "Slack sent no x-oauth-scopes header, so the scopes were not checked; skybot "
            f"needs {', '.join(needed)}",
            warning=True,
        )
    granted = {s.strip() for s in header.split(",") if s.strip()}
    missing = [scope for scope in needed if scope not in granted]
    if missing:
        why = "; ".join(f"{s}: {needed[s]}" for s in missing)
        return Check(
            "slack scopes",
            False,
            f"the bot token lacks {', '.join(missing)} ({why})",
            "Add the missing Bot Token Scopes on the app's OAuth & Permissions page, reinstall "
            "the app to the workspace, and use the new xoxb- token.",
        )
    return Check("slack scopes", True, f"the bot token has {', '.join(needed)}")


async def check_app_token(secrets: Secrets) -> Check:
    """apps.connections.open proves the app token works; the URL it returns is not used."""
    from bot.app import DEFAULT_SLACK_API_URL

    client = AsyncWebClient(
        token=secrets.app_token, base_url=secrets.api_url or DEFAULT_SLACK_API_URL
    )
    try:
        await asyncio.wait_for(
            client.apps_connections_open(app_token=secrets.app_token), SLACK_TIMEOUT_SECONDS
        )
    except Exception as error:  # any failure is the check's answer
        return Check(
            "socket mode",
            False,
            f"apps.connections.open failed: {_slack_error(error)}",
            NETWORK_FIX
            if _unreachable(error)
            else "Enable Socket Mode for the app and set SLACK_APP_TOKEN to an app-level token "
            "(xapp-…) with the connections:write scope.",
        )
    return Check("socket mode", True, "apps.connections.open OK with SLACK_APP_TOKEN")


_CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{6,}")


async def _channel_named(client: AsyncWebClient, name: str) -> dict[str, Any] | None:
    """The channel called `name` among those the bot can see (public, or private with it)."""
    cursor = None
    while True:
        page = await client.conversations_list(
            types="public_channel,private_channel",
            exclude_archived=True,
            limit=1000,
            cursor=cursor,
        )
        for channel in page.get("channels") or []:
            if channel.get("name") == name:
                return dict(channel)
        cursor = (page.get("response_metadata") or {}).get("next_cursor")
        if not cursor:
            return None


async def check_alert_channel(config: Config, secrets: Secrets) -> Check:
    """Storage alerts go to slack.alert_channel; without chat:write.public the bot posts only
    where it is a member, so a channel it was never invited to loses every alert."""
    from bot.app import web_client

    wanted = config.slack.alert_channel
    shown = wanted if _CHANNEL_ID.fullmatch(wanted) else f"#{wanted.removeprefix('#')}"
    invite = f"In {shown}, type `/invite @skybot` (the bot posts only where it is a member)."
    client = web_client(secrets)
    try:
        if _CHANNEL_ID.fullmatch(wanted):
            answer = await asyncio.wait_for(
                client.conversations_info(channel=wanted), SLACK_TIMEOUT_SECONDS
            )
            channel: dict[str, Any] | None = dict(answer["channel"])
        else:
            lookup = _channel_named(client, wanted.removeprefix("#"))
            channel = await asyncio.wait_for(lookup, SLACK_TIMEOUT_SECONDS)
    except Exception as error:  # any failure is the check's answer
        code = _slack_error(error)
        if code == "channel_not_found":
            channel = None
        elif code == "missing_scope":
            return Check(
                "alert channel",
                False,
                f"cannot look up {shown}: the bot token lacks channels:read/groups:read",
                "Add the channels:read and groups:read Bot Token Scopes (`skybot show "
                "manifest`), reinstall the app and use the new xoxb- token, or set "
                "slack.doctor_checks_alert_channel = false to skip this check.",
            )
        else:
            return Check(
                "alert channel",
                False,
                f"cannot look up {shown}: {code}",
                NETWORK_FIX if _unreachable(error) else f"Slack answered {code}.",
            )
    if channel is None:
        return Check(
            "alert channel",
            False,
            f"{shown} does not exist, or is private and skybot is not in it",
            f"Set slack.alert_channel to an existing channel; {invite}",
        )
    name = f"#{channel.get('name')} ({channel.get('id')})"
    if channel.get("is_archived"):
        return Check(
            "alert channel",
            False,
            f"{name} is archived",
            "Unarchive it or set slack.alert_channel to a live channel.",
        )
    if not channel.get("is_member"):
        return Check("alert channel", False, f"skybot is not a member of {name}", invite)
    return Check("alert channel", True, f"{name} exists and skybot is a member")


async def check_slack(config: Config, secrets: Secrets) -> list[Check]:
    presence = check_token_presence(config, secrets)
    if not presence.ok:
        return [presence]
    token = await check_bot_token(config, secrets)
    checks = [presence, *token]
    if token[0].ok and config.slack.doctor_checks_alert_channel:
        checks.append(await check_alert_channel(config, secrets))
    elif token[0].ok:
        checks.append(
            Check(
                "alert channel",
                True,
                f"not checked (slack.doctor_checks_alert_channel = false): invite skybot to "
                f"{config.slack.alert_channel} yourself",
                warning=True,
            )
        )
    if config.slack.mode == "socket":
        checks.append(await check_app_token(secrets))
    return checks
