"""The Slack OAuth scopes skybot's bot token needs, each with the code that needs it.

Kept in one place so `skybot doctor` and the app manifest (`skybot show manifest`, rendered
from the configuration) ask for exactly what the configured code calls. Add a scope here in
the same change that starts calling a new method.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from core.config_schema import Config

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient

log = logging.getLogger(__name__)

# Always needed.
CORE_SCOPES: dict[str, str] = {
    "commands": "the /sky slash command (handlers/slash.py)",
    # Posting to a user id lands in the app's DM with them, so DMs need no im:write.
    "chat:write": "chat.postMessage for DMs and channel alerts (scheduler/outbox_sender.py)",
    "files:write": "files_upload_v2 for `--chart` and the weekly digest's chart",
    "im:write": "conversations.open: a chart is shared in the user's DM by its channel id",
    "im:history": "conversations.history: after a crash mid-send, whether Slack already has "
    "the DM, by the outbox id in its metadata (scheduler/outbox_recheck.py)",
}

# Only `skybot doctor` reads channels, to check the bot is in slack.alert_channel; a site that
# turns the check off (slack.doctor_checks_alert_channel = false) grants neither.
ALERT_CHANNEL_CHECK_SCOPES: dict[str, str] = {
    "channels:read": "conversations.info/list: skybot doctor checks the bot is in the alert "
    "channel (bot/doctor/slack.py)",
    "groups:read": "the same check when the alert channel is private",
}

# Needed only when identity.email_domain is set: the email rule calls users.info and reads
# the profile's email (handlers/identity.py).
EMAIL_RULE_SCOPES: dict[str, str] = {
    "users:read": "users.info for the email identity rule (handlers/identity.py)",
    "users:read.email": "the email in users.info for the email identity rule",
}

# Every scope some configuration needs: what the code may call at all.
ALL_SCOPES: dict[str, str] = {**CORE_SCOPES, **ALERT_CHANNEL_CHECK_SCOPES, **EMAIL_RULE_SCOPES}


def scopes_needed(config: Config) -> dict[str, str]:
    """The scopes this configuration needs, mapped to why."""
    return {
        **CORE_SCOPES,
        **(ALERT_CHANNEL_CHECK_SCOPES if config.slack.doctor_checks_alert_channel else {}),
        **(EMAIL_RULE_SCOPES if config.identity.email_domain else {}),
    }


# What "one DM per notice, across a crash" needs besides chat:write: reading the DM back.
EXACTLY_ONCE_SCOPES = ("im:history",)
# auth.test at start-up, retried this often (at most) while Slack does not answer.
SCOPE_CHECK_RETRY_SECONDS = (5.0, 60.0)


def granted(header: str | None) -> set[str] | None:
    """The scopes in Slack's x-oauth-scopes header; None when Slack sent none."""
    if header is None:
        return None
    return {scope.strip() for scope in header.split(",") if scope.strip()}


def exactly_once_words(scopes: set[str] | None) -> tuple[bool, str]:
    """(on, why) for exactly-once DMs, given the bot token's scopes (None: not known yet)."""
    if scopes is None:
        return True, "not checked: Slack has not said which scopes the bot token has"
    missing = [scope for scope in EXACTLY_ONCE_SCOPES if scope not in scopes]
    if not missing:
        return True, f"on: the bot token has {', '.join(EXACTLY_ONCE_SCOPES)}"
    return False, (
        f"off: the bot token lacks {', '.join(missing)}, so a DM cut off by a crash (or whose "
        "answer was lost) is sent again rather than looked up in the DM; add the scope on the "
        "app's OAuth & Permissions page, reinstall the app and use the new token"
    )


class TokenScopes:
    """Which scopes the bot token has, as Slack says at start-up (auth.test's x-oauth-scopes
    header), and whether exactly-once DMs are on, said once in the log and on `/readyz`."""

    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client
        self.scopes: set[str] | None = None
        self.checked = False

    def exactly_once(self) -> tuple[bool, str]:
        return exactly_once_words(self.scopes)

    async def run(self, stop: asyncio.Event) -> None:
        """auth.test until Slack answers (a Slack outage at start-up only delays it)."""
        wait, longest = SCOPE_CHECK_RETRY_SECONDS
        while not stop.is_set():
            try:
                response = await self._client.auth_test()
            except Exception as error:  # Slack down, or the token refused: the sender says so
                log.debug("auth.test for the token's scopes failed: %r", error)
                try:
                    await asyncio.wait_for(stop.wait(), wait)
                except TimeoutError:
                    wait = min(longest, wait * 2)
                continue
            headers = response.headers or {}
            header = next(
                (str(v) for k, v in headers.items() if str(k).lower() == "x-oauth-scopes"), None
            )
            self.scopes, self.checked = granted(header), True
            on, why = self.exactly_once()
            (log.info if on else log.warning)("exactly-once DMs %s", why)
            return
