"""Who a watcher's messages go to: the Slack accounts linked to a cluster user."""

from __future__ import annotations

from typing import Protocol

# (team_id, user_id) of one linked Slack account.
SlackKey = tuple[str, str]


class SlackDirectory(Protocol):
    """Who to DM or mention for a cluster user (handlers.identity.IdentityDirectory)."""

    def slack_users_of(self, cluster_user: str) -> list[SlackKey]: ...


class LinkedDirectory(SlackDirectory, Protocol):
    """The directory as the poll's DM decision reads it: every link at once, copied on the
    loop, since the decision runs on the writer's thread (scheduler/watchers/poll_dms.py)."""

    def linked_accounts(self) -> dict[str, list[SlackKey]]: ...
