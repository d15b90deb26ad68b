"""The fake workspace the stand-in serves: team identity, tokens and users.

Kept as plain data so a test can see (and change) exactly what "Slack" knows, e.g. mark a user
deleted between two commands and check that the bot notices.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SlackUser:
    """A workspace member as users.info / users.lookupByEmail describe it.

    The flags are the ones a bot has to care about when mapping Slack users to cluster
    accounts: bots, deactivated accounts and guests (restricted / ultra-restricted).
    """

    id: str
    name: str
    email: str | None = None
    real_name: str | None = None
    is_bot: bool = False
    deleted: bool = False
    is_restricted: bool = False
    is_ultra_restricted: bool = False
    is_admin: bool = False
    tz: str = "Europe/London"

    def to_api(self, team_id: str) -> dict[str, Any]:
        """Render the user the way Slack's Web API does (a subset, same shape)."""
        real_name = self.real_name or self.name
        profile: dict[str, Any] = {
            "real_name": real_name,
            "real_name_normalized": real_name,
            "display_name": self.name,
            "display_name_normalized": self.name,
            "team": team_id,
        }
        if self.email is not None:
            profile["email"] = self.email
        return {
            "id": self.id,
            "team_id": team_id,
            "name": self.name,
            "deleted": self.deleted,
            "real_name": real_name,
            "tz": self.tz,
            "profile": profile,
            "is_admin": self.is_admin,
            "is_owner": False,
            "is_primary_owner": False,
            "is_restricted": self.is_restricted,
            "is_ultra_restricted": self.is_ultra_restricted,
            "is_bot": self.is_bot,
            "is_app_user": False,
            "updated": 1_700_000_000,
        }


@dataclass
class SlackChannel:
    """A channel as conversations.info describes it to the bot: whether the bot is in it
    decides whether it may post there, and a private one it is not in is invisible to it."""

    id: str
    name: str
    is_private: bool = False
    bot_is_member: bool = True
    is_archived: bool = False

    def to_api(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "name_normalized": self.name,
            "is_channel": not self.is_private,
            "is_group": False,
            "is_im": False,
            "is_private": self.is_private,
            "is_archived": self.is_archived,
            "is_member": self.bot_is_member,
            "created": 1_700_000_000,
        }


def _default_channels() -> dict[str, SlackChannel]:
    """The channel skybot's default config (slack.alert_channel) names, with the bot in it."""
    return {"C0SKYUSERS": SlackChannel("C0SKYUSERS", "skynet-users")}


@dataclass
class Workspace:
    """Team identity and credentials; defaults are obviously fake so they never leak anywhere."""

    bot_token: str = "xoxb-0000-standin-bot-token"
    app_token: str = "xapp-1-A0STANDIN-0000-standin-app-token"
    team_id: str = "T0STANDIN"
    team_domain: str = "skytest"
    team_name: str = "Sky Test"
    bot_user_id: str = "U0STANDINBOT"
    bot_id: str = "B0STANDIN"
    app_id: str = "A0STANDIN"
    # What Slack sends in the x-oauth-scopes header of bot-token calls; None sends no header.
    bot_scopes: str | None = (
        "commands,chat:write,files:write,im:history,im:write,channels:read,groups:read,"
        "users:read,users:read.email"
    )
    users: dict[str, SlackUser] = field(default_factory=dict)
    channels: dict[str, SlackChannel] = field(default_factory=_default_channels)

    def add_user(self, user: SlackUser) -> SlackUser:
        """Add or replace a user (keyed by id)."""
        self.users[user.id] = user
        return user

    def add_channel(self, channel: SlackChannel) -> SlackChannel:
        """Add or replace a channel (keyed by id)."""
        self.channels[channel.id] = channel
        return channel

    def user_by_email(self, email: str) -> SlackUser | None:
        """Slack matches e-mail addresses case-insensitively."""
        wanted = email.strip().lower()
        for user in self.users.values():
            if user.email is not None and user.email.lower() == wanted:
                return user
        return None
