"""Who a Slack user is on the cluster, answered from memory on the command path.

Sources, strongest first: an admin's link in the config; a proven link (the user wrote a
one-time code into a file only they can write, and the runner, running as them, read it back);
and, only if configured, the email rule for full, active members. Lookups are keyed on the
signed team_id + user_id, never on a display name.
"""

from __future__ import annotations

import logging
import pwd
import secrets
import time
from collections.abc import Callable

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from core.config_schema import IdentityConfig
from core.link_notices import new_link_notice
from core.slack_text import literal
from core.user_names import cluster_user_name
from store.identities import (
    Identity,
    LinkCode,
    delete_identity,
    link_identity,
    load_identities,
    load_link_code,
    save_link_code,
)
from store.outbox import OutboxMessage
from store.writer import StoreWriter

log = logging.getLogger(__name__)

# A member not matched by the email rule is asked again after this long, not on every command.
EMAIL_RETRY_SECONDS = 3600.0
MIN_HUMAN_UID = 1000

SlackKey = tuple[str, str]


class LinkRefused(Exception):
    """A link the site's rules do not allow; the message says why, to the user."""


def is_human_account(user: str) -> bool:
    """A real person's cluster account: exists, uid >= 1000, has a login shell."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return False
    return entry.pw_uid >= MIN_HUMAN_UID and not entry.pw_shell.endswith(("nologin", "false"))


class IdentityDirectory:
    def __init__(
        self,
        config: IdentityConfig,
        writer: StoreWriter,
        client: AsyncWebClient | None = None,
        clock: Callable[[], float] = time.time,
        wake_sender: Callable[[], None] = lambda: None,
    ) -> None:
        self._config = config
        self._writer = writer
        self._client = client
        self._clock = clock
        # The outbox sender: told a link notice is waiting, so it goes out now.
        self._wake_sender = wake_sender
        self._admin: dict[SlackKey, str] = {
            (key.split("/")[0], key.split("/")[1]): user for key, user in config.links.items()
        }
        self._stored: dict[SlackKey, Identity] = {}
        self._email_checked_at: dict[SlackKey, float] = {}

    async def load(self) -> None:
        identities = await self._writer.run(load_identities)
        self._stored = {(i.team_id, i.user_id): i for i in identities}

    def cluster_user(self, team_id: str, user_id: str) -> str | None:
        """lookup()'s cluster user, without making an Identity: asked on every command."""
        key = (team_id, user_id)
        admin = self._admin.get(key)
        if admin is not None:
            return admin
        stored = self._stored.get(key)
        return stored.cluster_user if stored is not None else None

    def lookup(self, team_id: str, user_id: str) -> Identity | None:
        admin = self._admin.get((team_id, user_id))
        if admin is not None:
            return Identity(team_id, user_id, admin, "admin", 0.0)
        return self._stored.get((team_id, user_id))

    async def resolve(self, team_id: str, user_id: str) -> str | None:
        """The cluster user, trying the email rule (one users.info call) if nothing else."""
        known = self.lookup(team_id, user_id)
        if known is not None:
            return known.cluster_user
        if not self._config.email_domain or self._client is None:
            return None
        key = (team_id, user_id)
        now = self._clock()
        if now - self._email_checked_at.get(key, -EMAIL_RETRY_SECONDS) < EMAIL_RETRY_SECONDS:
            return None
        self._email_checked_at[key] = now
        user = await self._user_from_email(user_id)
        if user is None:
            return None
        if self.slack_users_of(user) and not self._config.several_slack_accounts:
            # A link already made is not undone by a Slack profile: `/sky link` can, with proof.
            return None
        await self._link(Identity(team_id, user_id, user, "email", now))
        return user

    def slack_users_of(self, cluster_user: str) -> list[SlackKey]:
        """Every Slack account linked to this cluster user (for DMs)."""
        keys = {k for k, u in self._admin.items() if u == cluster_user}
        keys |= {k for k, i in self._stored.items() if i.cluster_user == cluster_user}
        return sorted(keys)

    def linked_accounts(self) -> dict[str, list[SlackKey]]:
        """`slack_users_of` for every linked cluster user at once: a copy, which the
        writer's thread may read while links change here on the loop."""
        found: dict[str, set[SlackKey]] = {}
        for key, user in self._admin.items():
            found.setdefault(user, set()).add(key)
        for key, identity in self._stored.items():
            found.setdefault(identity.cluster_user, set()).add(key)
        return {user: sorted(keys) for user, keys in found.items()}

    async def start_link(self, team_id: str, user_id: str, cluster_user: str) -> LinkCode:
        code = LinkCode(
            cluster_user,
            secrets.token_hex(8),
            self._clock() + 60 * self._config.link_code_minutes,
        )
        await self._writer.run(save_link_code, team_id, user_id, code)
        return code

    async def pending_code(self, team_id: str, user_id: str) -> LinkCode | None:
        return await self._writer.run(load_link_code, team_id, user_id, self._clock())

    async def confirm_link(self, team_id: str, user_id: str, cluster_user: str) -> list[SlackKey]:
        """Link a proven account; returns the Slack accounts linked to it before, now told
        (and, unless the site allows several, unlinked). LinkRefused if the site forbids it."""
        return await self._link(Identity(team_id, user_id, cluster_user, "proven", self._clock()))

    async def _link(self, identity: Identity) -> list[SlackKey]:
        key = (identity.team_id, identity.user_id)
        several = self._config.several_slack_accounts
        vouched = [k for k, u in self._admin.items() if u == identity.cluster_user and k != key]
        if vouched and not several:
            raise LinkRefused(
                f"The cluster admins have linked {literal(identity.cluster_user)} to another "
                "Slack account in skybot's configuration, and a cluster account has one Slack "
                "account here; ask them to change it."
            )

        def tell(other: SlackKey) -> OutboxMessage:
            text = new_link_notice(
                identity.cluster_user, identity.user_id, identity.source, replaced=not several
            )
            event = f"{identity.team_id}:{identity.user_id}:{identity.linked_at!r}"
            return OutboxMessage(f"link:{event}:{other[0]}:{other[1]}", other[1], text)

        others = await self._writer.run(
            link_identity,
            identity,
            keep_others=several,
            tell=lambda other: tell((other.team_id, other.user_id)),
            also=[tell(k) for k in vouched],
            now=self._clock(),
        )
        replaced = [(o.team_id, o.user_id) for o in others]
        if not several:
            for other in replaced:
                self._stored.pop(other, None)
        self._stored[key] = identity
        self._wake_sender()
        return sorted({*replaced, *vouched})

    async def unlink(self, team_id: str, user_id: str) -> bool:
        removed = await self._writer.run(delete_identity, team_id, user_id)
        self._stored.pop((team_id, user_id), None)
        return removed

    def is_admin_link(self, team_id: str, user_id: str) -> bool:
        return (team_id, user_id) in self._admin

    async def _user_from_email(self, user_id: str) -> str | None:
        assert self._client is not None
        try:
            response = await self._client.users_info(user=user_id)
        except SlackApiError as error:
            log.warning("users.info for %s failed: %s", user_id, error.response.get("error"))
            return None
        member = response.get("user") or {}
        if (
            member.get("deleted")
            or member.get("is_bot")
            or member.get("is_restricted")
            or member.get("is_ultra_restricted")
        ):
            return None
        email = str((member.get("profile") or {}).get("email") or "")
        local, _, domain = email.rpartition("@")
        if domain.casefold() != self._config.email_domain.casefold():
            return None
        user = cluster_user_name(local)
        if user is None or not is_human_account(user):
            return None
        return user
