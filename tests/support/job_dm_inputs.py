"""What the job-DM watcher decides with besides the store: a fixed Slack directory and a config
with the [notifications] a test names."""

from __future__ import annotations

from typing import Any

from msgspec import structs

from bot.config import Config, NotificationsConfig, load_config


class Links:
    """A fixed Slack directory: cluster user -> linked Slack accounts."""

    def __init__(self, links: dict[str, list[tuple[str, str]]]) -> None:
        self.links = links

    def slack_users_of(self, cluster_user: str) -> list[tuple[str, str]]:
        return self.links.get(cluster_user, [])


def config_with(**notifications: Any) -> Config:
    base = load_config(None)
    return structs.replace(base, notifications=NotificationsConfig(**notifications))
