"""Who a watcher's messages go to: the Slack accounts linked to a cluster user."""

from __future__ import annotations

from typing import Protocol

# (team_id, user_id) of one linked Slack account.
SlackKey = tuple[str, str]


class SlackDirectory(Protocol):
    """Who to DM or mention for a cluster user (handlers.identity.IdentityDirectory)."""

    def slack_users_of(self, cluster_user: str) -> list[SlackKey]: ...
