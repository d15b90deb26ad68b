"""Opening skybot's SQLite database and keeping its schema current.

WAL mode lets handlers read the last committed snapshot while a poller is writing the next
one: readers never wait for a poll. Migrations are numbered with SQLite's `user_version`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import sqlite_utils

from store.cluster_schema import CLUSTER_KEYS, STORAGE_KEYS

# Each entry migrates the schema from version i to i + 1: its statements, run in order in one
# transaction. Append only; never edit a shipped one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE source_status (
            source TEXT PRIMARY KEY, taken_at REAL, error TEXT, error_at REAL
        )
        """,
        "CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
        """
        CREATE TABLE jobs (
            job_id INTEGER PRIMARY KEY, user TEXT NOT NULL, account TEXT NOT NULL,
            partition TEXT NOT NULL, state TEXT NOT NULL, record TEXT NOT NULL
        )
        """,
        "CREATE INDEX jobs_user ON jobs(user)",
        "CREATE TABLE nodes (name TEXT PRIMARY KEY, record TEXT NOT NULL)",
        "CREATE TABLE lab_caps (account TEXT PRIMARY KEY, gpu_cap INTEGER)",
        """
        CREATE TABLE lab_members (
            account TEXT NOT NULL, user TEXT NOT NULL, PRIMARY KEY (account, user)
        )
        """,
        """
        CREATE TABLE directories (
            path TEXT PRIMARY KEY, root TEXT NOT NULL, owner TEXT NOT NULL,
            updated TEXT NOT NULL, kib INTEGER NOT NULL, human TEXT NOT NULL
        )
        """,
        """
        CREATE TABLE filesystems (
            mount TEXT PRIMARY KEY, size_bytes INTEGER NOT NULL, used_bytes INTEGER NOT NULL,
            avail_bytes INTEGER NOT NULL
        )
        """,
        """
        CREATE TABLE job_states (
            job_id INTEGER PRIMARY KEY, state TEXT NOT NULL, restarts INTEGER NOT NULL,
            seen_at REAL NOT NULL
        )
        """,
        """
        CREATE TABLE job_transitions (
            id INTEGER PRIMARY KEY AUTOINCREMENT, job_id INTEGER NOT NULL, user TEXT NOT NULL,
            from_state TEXT, to_state TEXT NOT NULL, restarts INTEGER NOT NULL, at REAL NOT NULL,
            record TEXT NOT NULL
        )
        """,
        "CREATE INDEX job_transitions_job ON job_transitions(job_id)",
        """
        CREATE TABLE lab_usage_history (
            at REAL NOT NULL, lab TEXT NOT NULL, gpus_used INTEGER NOT NULL, gpu_cap INTEGER,
            overcap_gpus INTEGER NOT NULL, PRIMARY KEY (at, lab)
        )
        """,
        """
        CREATE TABLE directory_history (
            path TEXT NOT NULL, updated TEXT NOT NULL, kib INTEGER NOT NULL,
            PRIMARY KEY (path, updated)
        )
        """,
        """
        CREATE TABLE filesystem_history (
            at REAL NOT NULL, mount TEXT NOT NULL, used_bytes INTEGER NOT NULL,
            size_bytes INTEGER NOT NULL, PRIMARY KEY (at, mount)
        )
        """,
    ),
    (
        """
        CREATE TABLE identities (
            team_id TEXT NOT NULL, user_id TEXT NOT NULL, cluster_user TEXT NOT NULL,
            source TEXT NOT NULL, linked_at REAL NOT NULL, PRIMARY KEY (team_id, user_id)
        )
        """,
        "CREATE INDEX identities_cluster_user ON identities(cluster_user)",
        """
        CREATE TABLE link_codes (
            team_id TEXT NOT NULL, user_id TEXT NOT NULL, cluster_user TEXT NOT NULL,
            code TEXT NOT NULL, expires_at REAL NOT NULL, PRIMARY KEY (team_id, user_id)
        )
        """,
    ),
    (
        """
        CREATE TABLE submissions (
            id INTEGER PRIMARY KEY AUTOINCREMENT, team_id TEXT NOT NULL, user_id TEXT NOT NULL,
            cluster_user TEXT NOT NULL, script TEXT NOT NULL, options TEXT NOT NULL,
            tag TEXT NOT NULL UNIQUE, state TEXT NOT NULL, response_url TEXT,
            created_at REAL NOT NULL, started_at REAL, finished_at REAL, attempts INTEGER NOT NULL,
            job_id INTEGER, error TEXT, reported_at REAL
        )
        """,
        "CREATE INDEX submissions_state ON submissions(state)",
        """
        CREATE TABLE audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, team_id TEXT NOT NULL,
            user_id TEXT NOT NULL, cluster_user TEXT, action TEXT NOT NULL, detail TEXT NOT NULL,
            result TEXT NOT NULL
        )
        """,
    ),
    # Notifications: the outbox every unprompted message goes through (store/outbox.py), the
    # alert state it is decided against (store/alerts.py), and who wants which job DMs. The
    # job-transition cursor starts at the newest transition already recorded, so upgrading a
    # running skybot does not DM about history.
    (
        """
        CREATE TABLE outbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE, target TEXT NOT NULL,
            text TEXT NOT NULL, blocks TEXT, state TEXT NOT NULL DEFAULT 'queued',
            attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at REAL NOT NULL, last_error TEXT,
            created_at REAL NOT NULL, sent_at REAL, slack_channel TEXT, slack_ts TEXT
        )
        """,
        "CREATE INDEX outbox_state ON outbox(state, id)",
        "CREATE TABLE notify_cursors (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
        """
        INSERT INTO notify_cursors (name, value)
            SELECT 'job_transitions', COALESCE(MAX(id), 0) FROM job_transitions
        """,
        """
        CREATE TABLE notify_prefs (
            team_id TEXT NOT NULL, user_id TEXT NOT NULL, pref TEXT NOT NULL,
            updated_at REAL NOT NULL, PRIMARY KEY (team_id, user_id)
        )
        """,
        """
        CREATE TABLE hoard_alerts (
            path TEXT PRIMARY KEY, updated TEXT NOT NULL, kib INTEGER NOT NULL
        )
        """,
        """
        CREATE TABLE filesystem_alerts (
            mount TEXT PRIMARY KEY, level REAL NOT NULL, warnings INTEGER NOT NULL
        )
        """,
    ),
    ("CREATE TABLE cap_episodes (lab TEXT PRIMARY KEY, since REAL NOT NULL)",),
    # Charts and the weekly digest: an outbox row may be a chart upload instead of a message;
    # GPU-seconds per lab, user and hour (lab or overcap), summed by the Slurm poller; and the
    # channels that asked for their lab's weekly digest.
    (
        "ALTER TABLE outbox ADD COLUMN chart TEXT",
        """
        CREATE TABLE gpu_seconds (
            hour REAL NOT NULL, lab TEXT NOT NULL, user TEXT NOT NULL, overcap INTEGER NOT NULL,
            seconds REAL NOT NULL, PRIMARY KEY (hour, lab, user, overcap)
        )
        """,
        """
        CREATE TABLE digest_channels (
            lab TEXT NOT NULL, channel TEXT NOT NULL, team_id TEXT NOT NULL, added_by TEXT NOT NULL,
            added_at REAL NOT NULL, PRIMARY KEY (lab, channel)
        )
        """,
    ),
    # Container images (`/sky images`), listed by the storage poller: one row per image with
    # its record (package list included), and the directory it listed, with why it could not.
    (
        "CREATE TABLE images (name TEXT PRIMARY KEY, record TEXT NOT NULL)",
        "CREATE TABLE image_dirs (path TEXT PRIMARY KEY, error TEXT)",
    ),
    # Who is told (and gets the message in their DM) when a channel refuses it for good: the
    # user who asked for a chart with --here, the user who turned a lab's digest on.
    ("ALTER TABLE outbox ADD COLUMN refused_to TEXT",),
    # Slack users who asked (`/sky notify logs off`) for failure DMs without their job's output.
    (
        """
        CREATE TABLE notify_log_optouts (
            team_id TEXT NOT NULL, user_id TEXT NOT NULL, updated_at REAL NOT NULL,
            PRIMARY KEY (team_id, user_id)
        )
        """,
    ),
    # Which poll last wrote each job and node row, and which rows polls deleted: the bot
    # reloads only those after a poll (store/row_log.py).
    (
        "ALTER TABLE jobs ADD COLUMN written_in INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX jobs_written_in ON jobs(written_in)",
        "ALTER TABLE nodes ADD COLUMN written_in INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX nodes_written_in ON nodes(written_in)",
        "CREATE TABLE rows_gone (tbl TEXT NOT NULL, key NOT NULL, written_in INTEGER NOT NULL)",
        "CREATE INDEX rows_gone_written_in ON rows_gone(written_in)",
    ),
    # Each lab's usage as of the last poll, counted by the poll worker from the jobs it
    # wrote: the bot reads it rather than counting 100,000 jobs again (store/snapshots.py).
    (
        """
        CREATE TABLE lab_usage (
            lab TEXT PRIMARY KEY, account TEXT NOT NULL, overcap_account TEXT NOT NULL,
            record TEXT NOT NULL
        )
        """,
    ),
    # Every poll prunes the history by age (store/history.py): without these, each prune read
    # every transition ever kept and every job state, a scan that grows with the site.
    (
        "CREATE INDEX job_transitions_at ON job_transitions(at)",
        "CREATE INDEX job_states_seen_at ON job_states(seen_at)",
    ),
    # GPU watches (`/sky watch`, store/watches.py): active while ended_at is NULL; a watch
    # ends, with its one DM enqueued, in one transaction. Start DMs (`/sky notify start`,
    # `/sky submit --notify-start`): who asked for all their jobs' starts, and which
    # submissions asked for theirs.
    (
        """
        CREATE TABLE gpu_watches (
            id INTEGER PRIMARY KEY AUTOINCREMENT, team_id TEXT NOT NULL, user_id TEXT NOT NULL,
            cluster_user TEXT NOT NULL, gpu_type TEXT NOT NULL, count INTEGER NOT NULL,
            overcap INTEGER NOT NULL, lab TEXT NOT NULL, partition TEXT NOT NULL,
            account TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL,
            ended_at REAL, outcome TEXT
        )
        """,
        "CREATE INDEX gpu_watches_active ON gpu_watches(ended_at, id)",
        """
        CREATE TABLE notify_start_optins (
            team_id TEXT NOT NULL, user_id TEXT NOT NULL, updated_at REAL NOT NULL,
            PRIMARY KEY (team_id, user_id)
        )
        """,
        "ALTER TABLE submissions ADD COLUMN notify_start INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX submissions_job_id ON submissions(job_id)",
    ),
    # When the outbox last handed a row to Slack without learning the outcome (store/outbox.py):
    # set before the call, kept when the answer never came, so a restart asks Slack first.
    ("ALTER TABLE outbox ADD COLUMN sending_since REAL",),
    # Several clusters in one database (issue 31): every row that names a job, a node, a lab's
    # limits or usage, or a source's status is keyed by its cluster, since job ids and node
    # names are only unique within one. Rows already here get the cluster '' and are named
    # by `adopt_unnamed_rows` (store/clusters.py) at start-up, once the configuration says
    # what today's cluster is called: a migration is a fixed list of statements, run by
    # every opener of the file (the doctor, a backup, a restore) without a configuration.
    CLUSTER_KEYS,
    # Storage per cluster (issue 38): the directories and filesystems each cluster's storage
    # poll reports, their history and alert state, keyed by cluster (store/cluster_schema.py).
    STORAGE_KEYS,
    # The cluster's partitions, QOS and reservations as its last limits poll read them
    # (store/limits.py), one record per cluster; and the maintenance reservations already
    # announced, so each is announced once however often the bot restarts (issue 43).
    (
        "CREATE TABLE slurm_limits (cluster TEXT PRIMARY KEY, record TEXT NOT NULL)",
        """
        CREATE TABLE announced_reservations (
            cluster TEXT NOT NULL, name TEXT NOT NULL, start INTEGER NOT NULL,
            announced_at REAL NOT NULL, PRIMARY KEY (cluster, name, start)
        )
        """,
    ),
    # Job arrays (store/arrays.py): `/sky notify tasks on` (a DM per array task rather than one
    # per array), and the arrays whose end DM waits for their last task to leave the queue.
    (
        """
        CREATE TABLE notify_task_optins (
            team_id TEXT NOT NULL, user_id TEXT NOT NULL, updated_at REAL NOT NULL,
            PRIMARY KEY (team_id, user_id)
        )
        """,
        """
        CREATE TABLE array_ends_waiting (
            cluster TEXT NOT NULL, array_job_id INTEGER NOT NULL, team_id TEXT NOT NULL,
            user_id TEXT NOT NULL, since REAL NOT NULL,
            PRIMARY KEY (cluster, array_job_id, team_id, user_id)
        )
        """,
    ),
    # The job form (`/sky submit` with no path, core/job_form.py): the script skybot wrote,
    # which the runner hands to sbatch on its standard input; for such a submission `script`
    # holds the working directory it is submitted from. NULL: a script file (`script`).
    ("ALTER TABLE submissions ADD COLUMN script_text TEXT",),
)

SCHEMA_VERSION = len(MIGRATIONS)


class SchemaTooNewError(RuntimeError):
    """The database was written by a newer skybot; refusing to guess at its schema."""

    def __init__(self, found: int, supported: int) -> None:
        super().__init__(f"database schema version {found} is newer than this skybot ({supported})")
        self.found = found
        self.supported = supported


def open_db(path: Path | str, *, any_thread: bool = False) -> sqlite_utils.Database:
    """Open (creating if needed) the database at `path`, migrated to the current schema.

    ":memory:" gives a private in-memory database (tests). `any_thread` allows a connection
    that its owner hands between worker threads, one at a time, under its own lock.
    """
    if str(path) == ":memory:":
        db = sqlite_utils.Database(memory=True)
    else:
        file = Path(path).expanduser()
        file.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite_utils.Database(sqlite3.connect(file, check_same_thread=not any_thread))
        db.enable_wal()
    # Another process may be mid-write; wait for it rather than fail at once.
    db.execute("PRAGMA busy_timeout = 5000")
    db.execute("PRAGMA synchronous = NORMAL")
    migrate(db)
    return db


def migrate_file(path: Path) -> None:
    """Bring the database file at `path` to the current schema, and close it."""
    db = sqlite_utils.Database(sqlite3.connect(path))
    try:
        migrate(db)
    finally:
        db.close()


def migrate(db: sqlite_utils.Database, migrations: Sequence[Sequence[str]] = MIGRATIONS) -> None:
    """Run the migrations the database has not had yet, each in its own transaction.

    Each statement is executed whole, as written: nothing splits SQL on `;`, so a trigger's
    body or a quoted semicolon is just part of its statement.
    """
    target = len(migrations)
    current = db.execute("PRAGMA user_version").fetchone()[0]
    if current > target:
        raise SchemaTooNewError(current, target)
    for version in range(current, target):
        with db.atomic():
            for statement in migrations[version]:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {version + 1}")
