"""Who each Slack user is on the cluster: proven links and pending link codes.

Keyed on the signed team_id + user_id, never on names a user can edit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import sqlite_utils

from store.outbox import OutboxMessage, enqueue


@dataclass(frozen=True, slots=True)
class Identity:
    team_id: str
    user_id: str
    cluster_user: str
    # "admin" (config), "proven" (link code in the user's home), "email" (Slack profile).
    source: str
    linked_at: float


@dataclass(frozen=True, slots=True)
class LinkCode:
    cluster_user: str
    code: str
    expires_at: float


def save_identity(db: sqlite_utils.Database, identity: Identity) -> None:
    with db.atomic():
        db.execute(
            "INSERT OR REPLACE INTO identities VALUES (?, ?, ?, ?, ?)",
            [
                identity.team_id,
                identity.user_id,
                identity.cluster_user,
                identity.source,
                identity.linked_at,
            ],
        )
        db.execute(
            "DELETE FROM link_codes WHERE team_id = ? AND user_id = ?",
            [identity.team_id, identity.user_id],
        )


def link_identity(
    db: sqlite_utils.Database,
    identity: Identity,
    *,
    keep_others: bool,
    tell: Callable[[Identity], OutboxMessage],
    also: Iterable[OutboxMessage] = (),
    now: float,
) -> list[Identity]:
    """Save a new link; every other Slack account linked to the same cluster account is told
    (`tell` makes its outbox message, `also` adds more) in the same transaction, and unless
    `keep_others` those links end with it. Returns the other links found."""
    with db.atomic():
        others = [
            Identity(*row)
            for row in db.execute(
                "SELECT * FROM identities WHERE cluster_user = ? "
                "AND NOT (team_id = ? AND user_id = ?)",
                [identity.cluster_user, identity.team_id, identity.user_id],
            )
        ]
        enqueue(db, [*(tell(other) for other in others), *also], now)
        if not keep_others:
            for other in others:
                delete_identity(db, other.team_id, other.user_id)
        save_identity(db, identity)
    return others


def delete_identity(db: sqlite_utils.Database, team_id: str, user_id: str) -> bool:
    with db.atomic():
        cursor = db.execute(
            "DELETE FROM identities WHERE team_id = ? AND user_id = ?", [team_id, user_id]
        )
        return cursor.rowcount > 0


def load_identities(db: sqlite_utils.Database) -> list[Identity]:
    return [Identity(*row) for row in db.execute("SELECT * FROM identities")]


def save_link_code(db: sqlite_utils.Database, team_id: str, user_id: str, code: LinkCode) -> None:
    """A new code replaces any earlier one for this Slack user."""
    with db.atomic():
        db.execute(
            "INSERT OR REPLACE INTO link_codes VALUES (?, ?, ?, ?, ?)",
            [team_id, user_id, code.cluster_user, code.code, code.expires_at],
        )


def load_link_code(
    db: sqlite_utils.Database, team_id: str, user_id: str, now: float
) -> LinkCode | None:
    row = db.execute(
        "SELECT cluster_user, code, expires_at FROM link_codes "
        "WHERE team_id = ? AND user_id = ? AND expires_at > ?",
        [team_id, user_id, now],
    ).fetchone()
    return LinkCode(*row) if row else None
