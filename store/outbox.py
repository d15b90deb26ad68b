"""The outbox: every message skybot posts on its own initiative, before it is sent.

Watchers decide and enqueue in one transaction with their own bookkeeping (alert state, the
job-transition cursor); the sender (scheduler/outbox_sender.py) delivers later. So a crash
loses nothing that was decided, and because each message has a unique key and is inserted
with INSERT OR IGNORE, a decision replayed after a crash is enqueued once.

A row is `queued` until Slack accepted it (`sent`) or it can never be delivered (`parked`,
with the error). Only queued rows are ever sent, so a sent message is never sent again. A row
that names `refused_to` is not lost when its channel refuses it for good: it is parked and,
in the same transaction, queued again for that user's DM with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from core.chart_specs import ChartSpec

QUEUED = "queued"
SENT = "sent"
PARKED = "parked"


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    """A message to enqueue. `target` is a channel (id or #name) or a user id (a DM).

    With `chart`, the message is that chart, drawn when it is sent, with `text` as its comment.
    If the target channel refuses it for good, it goes to `refused_to` (a user id) instead,
    with why.
    """

    key: str
    target: str
    text: str
    blocks: list[dict[str, Any]] | None = None
    chart: ChartSpec | None = None
    refused_to: str = ""


@dataclass(frozen=True, slots=True)
class QueuedMessage:
    """A row waiting to be sent."""

    id: int
    key: str
    target: str
    text: str
    blocks: list[dict[str, Any]] | None
    attempts: int
    next_attempt_at: float
    created_at: float
    chart: ChartSpec | None = None
    refused_to: str = ""
    # When an attempt whose outcome skybot never learned began (None: no such attempt).
    sending_since: float | None = None


def enqueue(db: sqlite_utils.Database, messages: Iterable[OutboxMessage], now: float) -> int:
    """Insert messages whose key is new; returns how many were new.

    Call it inside the caller's transaction (db.atomic()) so the messages commit together
    with the decision that produced them.
    """
    added = 0
    with db.atomic():
        # After a restore (store/backup.py), what the bot decides again may have been sent
        # by the bot that ran past the backup: each is checked in Slack first, as a send whose
        # outcome skybot never learned is.
        unsure_since = restored_sends_unsure_since(db, now)
        for m in messages:
            cursor = db.execute(
                "INSERT OR IGNORE INTO outbox (key, target, text, blocks, chart, refused_to, "
                "state, attempts, next_attempt_at, created_at, sending_since) "
                "VALUES (?, ?, ?, ?, ?, ?, 'queued', 0, ?, ?, ?)",
                [
                    m.key,
                    m.target,
                    m.text,
                    json.dumps(m.blocks) if m.blocks else None,
                    m.chart.to_json() if m.chart else None,
                    m.refused_to or None,
                    now,
                    now,
                    unsure_since,
                ],
            )
            added += cursor.rowcount
    return added


# Counters a restore sets (store/backup.py): when the restored backup was taken, and until
# when (wall clock) new messages are checked in Slack before they are sent.
RESTORED_BACKUP_TAKEN_AT = "restored_backup_taken_at"
RESTORE_RECHECK_UNTIL = "restore_recheck_until"


def known_keys(db: sqlite_utils.Database, keys: Iterable[str]) -> set[str]:
    """Which of these keys the outbox holds (queued, sent or parked)."""
    wanted = list(keys)
    if not wanted:
        return set()
    marks = ", ".join("?" * len(wanted))
    rows = db.execute(f"SELECT key FROM outbox WHERE key IN ({marks})", wanted).fetchall()
    return {str(row[0]) for row in rows}


def restored_sends_unsure_since(db: sqlite_utils.Database, now: float) -> float | None:
    """The backup's time while a restore's recheck window is open, else None."""
    rows = dict(
        db.execute(
            "SELECT name, value FROM counters WHERE name IN (?, ?)",
            [RESTORED_BACKUP_TAKEN_AT, RESTORE_RECHECK_UNTIL],
        ).fetchall()
    )
    until, taken = rows.get(RESTORE_RECHECK_UNTIL), rows.get(RESTORED_BACKUP_TAKEN_AT)
    return float(taken) if until is not None and taken is not None and now < until else None


def load_queued(db: sqlite_utils.Database, limit: int = 500) -> list[QueuedMessage]:
    """Queued messages, oldest first (the sender keeps each target's messages in order)."""
    rows = db.execute(
        f"SELECT {_QUEUED_COLUMNS} FROM outbox WHERE state = 'queued' ORDER BY id LIMIT ?",
        [limit],
    ).fetchall()
    return [_queued(r) for r in rows]


def load_queued_heads(db: sqlite_utils.Database, limit: int = 500) -> list[QueuedMessage]:
    """The oldest queued message of each target, oldest first: what may be sent next.

    Not the oldest N messages: behind a burst of a thousand DMs to five users, a sixth
    user's one DM would not be among them, and would wait for the burst to drain.
    """
    rows = db.execute(
        f"SELECT {_QUEUED_COLUMNS} FROM outbox WHERE id IN "
        "(SELECT MIN(id) FROM outbox WHERE state = 'queued' GROUP BY target) ORDER BY id LIMIT ?",
        [limit],
    ).fetchall()
    return [_queued(r) for r in rows]


@dataclass(frozen=True, slots=True)
class Claim:
    """What the sender may send now, or (`message` None) when the next becomes due."""

    message: QueuedMessage | None
    next_due: float | None = None


def claim_next_due(
    db: sqlite_utils.Database,
    now: float,
    free_at: Mapping[str, float],
    skip: Collection[str] = (),
) -> Claim:
    """The oldest message that is due now and heads its target's queue, in one transaction
    with its `sending_since` (a DM, before the call that hands it to Slack: see
    `mark_sending`): one writer call per message claimed, instead of a load and a mark.

    `free_at` is the sender's own pace per target (a target waits until then); targets in
    `skip` failed in this pass and wait behind their failure. Nothing due: when the first
    head (skipped ones too) becomes due, None with nothing queued. The message returned is
    as it was before the claim: its `sending_since` says whether an earlier attempt's outcome
    is unknown (the sender then looks in Slack first)."""
    with db.atomic():
        heads = db.execute(
            "SELECT id, target, next_attempt_at FROM outbox WHERE id IN "
            "(SELECT MIN(id) FROM outbox WHERE state = 'queued' GROUP BY target) ORDER BY id"
        ).fetchall()
        ready = [(max(at, free_at.get(target, 0.0)), i, target) for i, target, at in heads]
        due = next((i for at, i, target in ready if at <= now and target not in skip), None)
        if due is None:
            return Claim(None, min((at for at, _, _ in ready), default=None))
        row = db.execute(f"SELECT {_QUEUED_COLUMNS} FROM outbox WHERE id = ?", [due]).fetchone()
        message = _queued(row)
        if is_direct_message(message):
            # An earlier attempt still unsure keeps its time: Slack is searched from there.
            db.execute(
                "UPDATE outbox SET sending_since = COALESCE(sending_since, ?) WHERE id = ?",
                [now, due],
            )
        return Claim(message)


def is_direct_message(message: QueuedMessage) -> bool:
    """A DM (to a user id), not a channel post or a chart: only a DM is looked up in Slack
    when an attempt's outcome is unknown (scheduler/outbox_recheck.py)."""
    return message.chart is None and message.target[:1] in ("U", "W")


_QUEUED_COLUMNS = (
    "id, key, target, text, blocks, attempts, next_attempt_at, created_at, chart, refused_to, "
    "sending_since"
)


def _queued(r: Any) -> QueuedMessage:
    return QueuedMessage(
        r[0],
        r[1],
        r[2],
        r[3],
        json.loads(r[4]) if r[4] else None,
        r[5],
        r[6],
        r[7],
        ChartSpec.from_json(r[8]) if r[8] else None,
        r[9] or "",
        r[10],
    )


def mark_sending(db: sqlite_utils.Database, message_id: int, now: float) -> None:
    """Record, before the call, that the message is being handed to Slack: until Slack's answer
    settles it, whether it was delivered is unknown."""
    with db.atomic():
        db.execute(
            "UPDATE outbox SET sending_since = ? WHERE id = ? AND state = 'queued'",
            [now, message_id],
        )


def mark_sent(
    db: sqlite_utils.Database, message_id: int, now: float, channel: str = "", ts: str = ""
) -> bool:
    """Record that Slack accepted the message. False if it was not queued (never resent)."""
    with db.atomic():
        cursor = db.execute(
            "UPDATE outbox SET state = 'sent', sent_at = ?, attempts = attempts + 1, "
            "last_error = NULL, slack_channel = ?, slack_ts = ? WHERE id = ? AND state = 'queued'",
            [now, channel, ts, message_id],
        )
        return cursor.rowcount == 1


def reschedule(
    db: sqlite_utils.Database,
    message_id: int,
    next_attempt_at: float,
    error: str,
    *,
    maybe_delivered: bool = False,
) -> None:
    """A failed attempt that may succeed later: count it and try again at `next_attempt_at`.

    `maybe_delivered`: Slack's answer did not say the message was refused (a network error, a
    5xx), so `sending_since` stays and the next attempt asks Slack first."""
    with db.atomic():
        db.execute(
            "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ?, last_error = ?, "
            "sending_since = CASE WHEN ? THEN sending_since END "
            "WHERE id = ? AND state = 'queued'",
            [next_attempt_at, error, maybe_delivered, message_id],
        )


def retry_queued_now(db: sqlite_utils.Database, now: float) -> int:
    """Make every queued message waiting on a retry due now (the connection to Slack is back).

    Per-channel rate limits are the sender's to keep: they do not live in the database.
    """
    with db.atomic():
        cursor = db.execute(
            "UPDATE outbox SET next_attempt_at = ? WHERE state = 'queued' AND next_attempt_at > ?",
            [now, now],
        )
        return cursor.rowcount


def shift_retries(db: sqlite_utils.Database, now: float, moved: float) -> int:
    """The wall clock was stepped back by `-moved` seconds: every retry that was still waiting
    keeps the wait it had left (a retry due in 30 s is not due in an hour); what was queued
    since, at the new time, stays as it is."""
    with db.atomic():
        cursor = db.execute(
            "UPDATE outbox SET next_attempt_at = next_attempt_at + ? "
            "WHERE state = 'queued' AND next_attempt_at > ?",
            [moved, now - moved],
        )
        return cursor.rowcount


def park(db: sqlite_utils.Database, message_id: int, error: str) -> None:
    """Give up on a message that can never be delivered, keeping it and why for the admins."""
    with db.atomic():
        db.execute(
            "UPDATE outbox SET state = 'parked', attempts = attempts + 1, last_error = ? "
            "WHERE id = ? AND state = 'queued'",
            [error, message_id],
        )


def park_and_redirect(
    db: sqlite_utils.Database, message_id: int, error: str, redirect: OutboxMessage, now: float
) -> None:
    """Park a message and, in the same transaction, queue what goes out instead."""
    with db.atomic():
        park(db, message_id, error)
        enqueue(db, [redirect], now)


def requeue_parked(db: sqlite_utils.Database, now: float, key_prefix: str = "") -> int:
    """Put parked messages back in the queue (after the admins fixed the cause)."""
    with db.atomic():
        cursor = db.execute(
            "UPDATE outbox SET state = 'queued', next_attempt_at = ? "
            "WHERE state = 'parked' AND key LIKE ? ESCAPE '\\'",
            [now, _like_prefix(key_prefix)],
        )
        return cursor.rowcount


def prune_outbox(db: sqlite_utils.Database, before: float) -> None:
    """Forget sent and parked messages created before `before` (queued ones are kept)."""
    with db.atomic():
        db.execute(
            "DELETE FROM outbox WHERE state IN ('sent', 'parked') AND created_at < ?", [before]
        )


def outbox_rows(db: sqlite_utils.Database, state: str | None = None) -> list[dict[str, Any]]:
    """Every row (or those in one state), oldest first: for tests, admins and debugging."""
    if state is None:
        return list(db.query("SELECT * FROM outbox ORDER BY id"))
    return list(db.query("SELECT * FROM outbox WHERE state = ? ORDER BY id", [state]))


def outbox_counts(db: sqlite_utils.Database) -> dict[str, int]:
    """How many rows are in each state (queued, sent, parked); a state with none is absent."""
    return dict(db.execute("SELECT state, COUNT(*) FROM outbox GROUP BY state").fetchall())


def parked_error_counts(db: sqlite_utils.Database) -> dict[str | None, int]:
    """Parked rows by the error they were parked with (None: parked without one)."""
    return dict(
        db.execute(
            "SELECT last_error, COUNT(*) FROM outbox WHERE state = ? GROUP BY last_error",
            [PARKED],
        ).fetchall()
    )


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"
