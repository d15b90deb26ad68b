"""The Slack OAuth scopes skybot's bot token needs, each with the code that needs it.

Kept in one place so `skybot doctor` and the app manifest (`skybot show manifest`, rendered
from the configuration) ask for exactly what the configured code calls. Add a scope here in
the same change that starts calling a new method.
"""

from __future__ import annotations

from core.config_schema import Config

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
