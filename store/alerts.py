"""What the watchers remember between runs: alert state, the transition cursor, preferences.

The watchers read and write these inside the same transaction as the outbox rows they
enqueue (scheduler/watchers/), so state and messages never disagree after a crash.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import sqlite_utils

from core.storage_alerts import FillState, HoardPing
from store.clusters import cluster_counter

JOB_TRANSITIONS_CURSOR = "job_transitions"

# ------------------------------------------------------------------------------ alert state


def load_hoard_state(db: sqlite_utils.Database, cluster: str) -> dict[str, HoardPing]:
    """The report each of the cluster's directories was last pinged for."""
    return {
        path: HoardPing(datetime.fromisoformat(updated), kib)
        for path, updated, kib in db.execute(
            "SELECT path, updated, kib FROM hoard_alerts WHERE cluster = ?", [cluster]
        )
    }


def save_hoard_state(
    db: sqlite_utils.Database, cluster: str, state: Mapping[str, HoardPing]
) -> None:
    with db.atomic():
        db.conn.executemany(
            "INSERT INTO hoard_alerts (cluster, path, updated, kib) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(cluster, path) DO UPDATE SET updated = excluded.updated, "
            "kib = excluded.kib",
            ((cluster, path, ping.updated.isoformat(), ping.kib) for path, ping in state.items()),
        )


def load_fill_state(db: sqlite_utils.Database, cluster: str) -> dict[str, FillState]:
    """Each of the cluster's filesystems' latched fill threshold."""
    return {
        mount: FillState(level, warnings)
        for mount, level, warnings in db.execute(
            "SELECT mount, level, warnings FROM filesystem_alerts WHERE cluster = ?", [cluster]
        )
    }


def save_fill_state(
    db: sqlite_utils.Database, cluster: str, state: Mapping[str, FillState]
) -> None:
    with db.atomic():
        db.conn.executemany(
            "INSERT INTO filesystem_alerts (cluster, mount, level, warnings) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(cluster, mount) DO UPDATE SET level = excluded.level, "
            "warnings = excluded.warnings",
            ((cluster, mount, s.level, s.warnings) for mount, s in state.items()),
        )


# ------------------------------------------------------------------------------ cursor


def load_cursor(db: sqlite_utils.Database, cluster: str, name: str = JOB_TRANSITIONS_CURSOR) -> int:
    """The id of the cluster's last job_transitions row already turned into notices."""
    row = db.execute(
        "SELECT value FROM notify_cursors WHERE name = ?", [cluster_counter(name, cluster)]
    ).fetchone()
    return row[0] if row else 0


def advance_cursor(
    db: sqlite_utils.Database,
    cluster: str,
    expected: int,
    value: int,
    name: str = JOB_TRANSITIONS_CURSOR,
) -> bool:
    """Move the cluster's cursor from `expected` to `value`; False (and no change) if someone
    moved it."""
    with db.atomic():
        current = load_cursor(db, cluster, name)
        if current != expected:
            return False
        db.execute(
            "INSERT INTO notify_cursors (name, value) VALUES (?, ?) "
            "ON CONFLICT(name) DO UPDATE SET value = excluded.value",
            [cluster_counter(name, cluster), value],
        )
        return True


# ------------------------------------------------------------------------------ preferences


def load_preference(db: sqlite_utils.Database, team_id: str, user_id: str) -> str | None:
    """A Slack user's `/sky notify` choice, or None if they never chose."""
    row = db.execute(
        "SELECT pref FROM notify_prefs WHERE team_id = ? AND user_id = ?", [team_id, user_id]
    ).fetchone()
    return row[0] if row else None


def save_preference(
    db: sqlite_utils.Database, team_id: str, user_id: str, pref: str, now: float
) -> None:
    with db.atomic():
        db.execute(
            "INSERT INTO notify_prefs (team_id, user_id, pref, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(team_id, user_id) DO UPDATE SET pref = excluded.pref, "
            "updated_at = excluded.updated_at",
            [team_id, user_id, pref, now],
        )


def load_preferences(db: sqlite_utils.Database) -> dict[tuple[str, str], str]:
    """Every explicit choice by (team_id, user_id); absent users get the configured default."""
    return {
        (team, user): pref
        for team, user, pref in db.execute("SELECT team_id, user_id, pref FROM notify_prefs")
    }


def log_tails_wanted(db: sqlite_utils.Database, team_id: str, user_id: str) -> bool:
    """Whether the Slack user gets their job's output in failure DMs (unless they said no)."""
    row = db.execute(
        "SELECT 1 FROM notify_log_optouts WHERE team_id = ? AND user_id = ?", [team_id, user_id]
    ).fetchone()
    return row is None


def save_log_tails_wanted(
    db: sqlite_utils.Database, team_id: str, user_id: str, wanted: bool, now: float
) -> None:
    with db.atomic():
        if wanted:
            db.execute(
                "DELETE FROM notify_log_optouts WHERE team_id = ? AND user_id = ?",
                [team_id, user_id],
            )
        else:
            db.execute(
                "INSERT OR REPLACE INTO notify_log_optouts (team_id, user_id, updated_at) "
                "VALUES (?, ?, ?)",
                [team_id, user_id, now],
            )


def load_log_tail_optouts(db: sqlite_utils.Database) -> set[tuple[str, str]]:
    """(team_id, user_id) of everyone who turned the output in failure DMs off."""
    return {
        (team, user) for team, user in db.execute("SELECT team_id, user_id FROM notify_log_optouts")
    }


def load_cap_episodes(db: sqlite_utils.Database, cluster: str) -> dict[str, float]:
    """Lab -> when its current stretch at the GPU cap began, on the cluster."""
    return dict(
        db.execute("SELECT lab, since FROM cap_episodes WHERE cluster = ?", [cluster]).fetchall()
    )


def save_cap_episodes(db: sqlite_utils.Database, cluster: str, episodes: dict[str, float]) -> None:
    db.execute("DELETE FROM cap_episodes WHERE cluster = ?", [cluster])
    db.conn.executemany(
        "INSERT INTO cap_episodes (cluster, lab, since) VALUES (?, ?, ?)",
        [(cluster, lab, since) for lab, since in episodes.items()],
    )


# ------------------------------------------------------------------------------ start DMs


def load_start_optins(db: sqlite_utils.Database) -> set[tuple[str, str]]:
    """(team, Slack user) of everyone who turned start DMs on (`/sky notify start on`)."""
    return {(r[0], r[1]) for r in db.execute("SELECT team_id, user_id FROM notify_start_optins")}


def starts_wanted(db: sqlite_utils.Database, team_id: str, user_id: str) -> bool:
    return (team_id, user_id) in load_start_optins(db)


def save_starts_wanted(
    db: sqlite_utils.Database, team_id: str, user_id: str, wanted: bool, now: float
) -> None:
    with db.atomic():
        if wanted:
            db.execute(
                "INSERT OR REPLACE INTO notify_start_optins (team_id, user_id, updated_at) "
                "VALUES (?, ?, ?)",
                [team_id, user_id, now],
            )
        else:
            db.execute(
                "DELETE FROM notify_start_optins WHERE team_id = ? AND user_id = ?",
                [team_id, user_id],
            )
