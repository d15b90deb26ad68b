"""Writing the pollers' snapshots and reading them back.

Pollers are the only writers (one way in for data); handlers and watchers only read. Each
successful write bumps `snapshot_version`, so a reader can keep the decoded snapshot in memory
and reload it only when something new was committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any, TypeVar

import sqlite_utils

from core.gc_pauses import no_collections
from core.het_jobs import fold_het_jobs
from core.job_output import host_names, with_host_names
from core.lab_usage import LabUsage
from core.record_codec import (
    decode_image,
    decode_job,
    decode_node,
    decode_usage,
    encode_record,
)
from core.records import (
    ContainerImage,
    DirectoryUsage,
    FilesystemUsage,
    ImageDirectory,
    Job,
    LabCap,
    Node,
)
from core.snapshot import SOURCES, ClusterSnapshot, SourceStatus
from core.snapshot_rows import SlurmChanges, job_row, node_row
from core.transitions import (
    KnownState,
    Transition,
    awaiting_gpus,
    detect_transitions,
    ended_before,
    ending_without_squeue,
    merge_observations,
    with_gaps_filled,
    with_gpus,
    with_known_restarts,
    with_last_seen,
)
from store.loaded_rows import LoadedRows
from store.row_log import log_gone, next_rows_version
from store.unreadable import name_once, readable

R = TypeVar("R")


def save_slurm_poll(
    db: sqlite_utils.Database,
    live: Sequence[Job],
    accounted: Sequence[Job],
    nodes: Sequence[Node],
    at: float,
    accounting_answered: bool = True,
) -> list[Transition]:
    """Replace the job and node snapshot and record state transitions, in one transaction.

    `live` is what squeue lists now; `accounted` is what sacct reported since the last poll
    (empty, with `accounting_answered` false, when sacct failed: jobs that left squeue keep
    their last state until it answers). Returns the transitions recorded. A het job's
    components are stored as the one job they are (core/het_jobs.py), and %N's host names
    resolved (core/job_output.py), as the poll does.
    """
    names = host_names(nodes)
    live = fold_het_jobs(with_host_names(live, names))
    accounted = fold_het_jobs(with_host_names(accounted, names))
    changes = SlurmChanges(
        full=True,
        job_rows=[job_row(j) for j in live],
        gone_job_ids=(),
        node_rows=[node_row(n) for n in nodes],
        gone_nodes=(),
        observed=merge_observations(live, accounted).values(),
    )
    return save_slurm_changes(db, changes, at, accounting_answered)


def save_slurm_changes(
    db: sqlite_utils.Database,
    changes: SlurmChanges,
    at: float,
    accounting_answered: bool = True,
) -> list[Transition]:
    """Apply one poll's changes to the snapshot and record its transitions, in one
    transaction; the same tables as a full replacement would leave."""
    conn = db.conn
    # A first poll's save of 100,000 jobs set off collections of 57-122 ms on the writer's
    # thread, holding the loop's acks (benchmarks/poll_ack_latency.py --probe).
    with no_collections(), db.atomic():
        observed = {job.job_id: job for job in changes.observed}
        known, unreadable = _known_states(conn, None if changes.full else list(observed))
        for job_id in unreadable.intersection(observed):
            name_once(f"job {job_id}: its stored state cannot be read; left out of this poll")
            del observed[job_id]
        observed = with_known_restarts(known, observed)
        ended = ending_without_squeue(known, observed, live_ids=())
        listed = _listed_now(conn, changes, ended)
        told_by_sacct = [job_id for job_id in ended if job_id not in listed]
        if told_by_sacct:
            observed = with_last_seen(observed, last_seen_jobs(db, told_by_sacct))
        missing_gpus = awaiting_gpus(known, observed)
        if missing_gpus:
            observed = with_gpus(observed, last_allocated_gpus(db, missing_gpus))
        start = history_start(db, at)
        left_out: list[int] = []
        transitions = [
            t for t in detect_transitions(known, observed, left_out) if not ended_before(t, start)
        ]
        for job_id in left_out:
            name_once(f"job {job_id}: its states cannot be compared; left out of this poll")
            del observed[job_id]
        # Plain executemany: at 10,000 jobs per poll, sqlite-utils' per-batch column
        # detection costs more than the inserts themselves.
        _write_rows(conn, changes)
        conn.execute("DELETE FROM lab_usage")
        conn.executemany(
            "INSERT INTO lab_usage (lab, account, overcap_account, record) VALUES (?, ?, ?, ?)",
            changes.lab_usages or (),
        )
        conn.executemany(
            "INSERT INTO job_states (job_id, state, restarts, seen_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(job_id) DO UPDATE SET state = excluded.state, "
            "restarts = excluded.restarts, seen_at = excluded.seen_at",
            ((j.job_id, j.state, j.restarts, at) for j in observed.values()),
        )
        conn.executemany(
            "INSERT INTO job_transitions (job_id, user, from_state, to_state, restarts, at, "
            "record) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                (
                    t.job.job_id,
                    t.job.user,
                    t.from_state,
                    t.to_state,
                    t.restarts,
                    at,
                    encode_record(t.job),
                )
                for t in transitions
            ),
        )
        _mark_success(db, "slurm", at)
        if accounting_answered:
            _mark_success(db, "accounting", at)
    return transitions


def _write_rows(conn: Any, changes: SlurmChanges) -> None:
    """The job and node rows, each tagged with this save's rows version (store/row_log.py)."""
    if not (
        changes.full
        or changes.job_rows
        or changes.gone_job_ids
        or changes.node_rows
        or changes.gone_nodes
    ):
        return
    version = next_rows_version(conn, changes.full)
    if changes.full:
        conn.execute("DELETE FROM jobs")
        conn.execute("DELETE FROM nodes")
    else:
        conn.executemany("DELETE FROM jobs WHERE job_id = ?", ((i,) for i in changes.gone_job_ids))
        conn.executemany("DELETE FROM nodes WHERE name = ?", ((n,) for n in changes.gone_nodes))
        log_gone(conn, "jobs", changes.gone_job_ids, version)
        log_gone(conn, "nodes", changes.gone_nodes, version)
    conn.executemany(
        "INSERT OR REPLACE INTO jobs (job_id, user, account, partition, state, record, "
        "written_in) VALUES (?, ?, ?, ?, ?, ?, ?)",
        ((*row, version) for row in changes.job_rows),
    )
    conn.executemany(
        "INSERT OR REPLACE INTO nodes (name, record, written_in) VALUES (?, ?, ?)",
        ((*row, version) for row in changes.node_rows),
    )


def _known_states(conn: Any, job_ids: list[int] | None) -> tuple[dict[int, KnownState], set[int]]:
    """What the store knew of these jobs (all jobs with None), and which jobs' stored state
    is not a state (SQLite keeps whatever type a row was given)."""
    if job_ids is None:
        rows: Iterable[Any] = conn.execute("SELECT job_id, state, restarts FROM job_states")
    else:
        rows = (
            row
            for chunk in _chunks(job_ids, 500)
            for row in conn.execute(
                "SELECT job_id, state, restarts FROM job_states WHERE job_id IN "
                f"({', '.join('?' for _ in chunk)})",
                chunk,
            )
        )
    known: dict[int, KnownState] = {}
    unreadable: set[int] = set()
    for job_id, state, restarts in rows:
        if type(state) is str and type(restarts) is int:
            known[job_id] = KnownState(state, restarts)
        else:
            unreadable.add(job_id)
    return known, unreadable


# States in which a job holds the GPUs its record lists (allocated, not requested).
_HOLDING_STATES = ("RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED")


def _listed_now(conn: Any, changes: SlurmChanges, job_ids: Sequence[int]) -> set[int]:
    """Which of `job_ids` squeue lists after this poll: in its changed rows, or (for a poll of
    changes only) still in the table and not gone."""
    wanted = set(job_ids)
    listed = {row[0] for row in changes.job_rows if row[0] in wanted}
    if changes.full or not wanted:
        return listed
    gone = set(changes.gone_job_ids)
    for chunk in _chunks(sorted(wanted - listed), 500):
        marks = ", ".join("?" for _ in chunk)
        rows = conn.execute(f"SELECT job_id FROM jobs WHERE job_id IN ({marks})", chunk)
        listed.update(job_id for (job_id,) in rows if job_id not in gone)
    return listed


def last_allocated_gpus(
    db: sqlite_utils.Database, job_ids: Sequence[int]
) -> dict[int, dict[str, int]]:
    """The GPUs each job was last seen holding: in the previous snapshot, or else in the
    latest recorded transition that found it running."""
    found: dict[int, dict[str, int]] = {}
    for chunk in _chunks(list(job_ids), 500):
        marks = ", ".join("?" for _ in chunk)
        holding = ", ".join("?" for _ in _HOLDING_STATES)
        rows = db.execute(
            f"SELECT job_id, record, 0 AS source, 0 AS id FROM jobs WHERE job_id IN ({marks}) "
            f"AND state IN ({holding}) UNION ALL "
            f"SELECT job_id, record, 1, id FROM job_transitions WHERE job_id IN ({marks}) "
            f"AND to_state IN ({holding}) ORDER BY source, id DESC",
            [*chunk, *_HOLDING_STATES, *chunk, *_HOLDING_STATES],
        ).fetchall()
        for job_id, record, _, _ in rows:
            if job_id not in found:
                job = readable(f"job {job_id}", decode_job, record)
                if job is not None and job.gpus_by_type:
                    found[job_id] = job.gpus_by_type
    return found


def last_seen_jobs(db: sqlite_utils.Database, job_ids: Sequence[int]) -> dict[int, Job]:
    """Each job as skybot last saw it: its record in the previous snapshot (squeue's), or
    else its latest recorded transition, with what that leaves empty (an output path sacct
    did not give) filled from its earlier records."""
    found: dict[int, Job] = {}
    for chunk in _chunks(list(job_ids), 500):
        marks = ", ".join("?" for _ in chunk)
        rows = db.execute(
            f"SELECT job_id, record, 0 AS source, 0 AS id FROM jobs WHERE job_id IN ({marks}) "
            f"UNION ALL SELECT job_id, record, 1, id FROM job_transitions "
            f"WHERE job_id IN ({marks}) ORDER BY source, id DESC",
            [*chunk, *chunk],
        ).fetchall()
        for job_id, record, _, _ in rows:
            earlier = readable(f"job {job_id}", decode_job, record)
            if earlier is None:
                continue
            later = found.get(job_id)
            found[job_id] = earlier if later is None else with_gaps_filled(later, earlier)
    return found


def _chunks(items: list[int], size: int) -> Iterable[list[int]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def save_caps(
    db: sqlite_utils.Database,
    caps: Iterable[LabCap],
    members: Mapping[str, Iterable[str]],
    at: float,
) -> None:
    """Replace the GPU caps and account memberships from Slurm's associations."""
    with db.atomic():
        db.execute("DELETE FROM lab_caps")
        db.table("lab_caps").insert_all({"account": c.account, "gpu_cap": c.gpu_cap} for c in caps)
        db.execute("DELETE FROM lab_members")
        db.table("lab_members").insert_all(
            {"account": account, "user": user}
            for account, users in members.items()
            for user in users
        )
        _mark_success(db, "caps", at)


def save_storage(
    db: sqlite_utils.Database,
    directories: Sequence[DirectoryUsage],
    filesystems: Sequence[FilesystemUsage],
    at: float,
    image_dir: ImageDirectory | None = None,
    images: Sequence[ContainerImage] = (),
) -> None:
    """Replace the storage snapshot and extend its history (one row per weekly report).

    With `image_dir`, the container image list is replaced too; without, it is left as it was.
    """
    with db.atomic():
        if image_dir is not None:
            _replace_images(db, image_dir, images)
        db.execute("DELETE FROM directories")
        db.table("directories").insert_all(_directory_row(d) for d in directories)
        db.execute("DELETE FROM filesystems")
        db.table("filesystems").insert_all(asdict(f) for f in filesystems)
        db.table("directory_history").insert_all(
            ({"path": d.path, "updated": d.updated.isoformat(), "kib": d.kib} for d in directories),
            ignore=True,
        )
        db.table("filesystem_history").insert_all(
            (
                {"at": at, "mount": f.mount, "used_bytes": f.used_bytes, "size_bytes": f.size_bytes}
                for f in filesystems
            ),
            ignore=True,
        )
        _mark_success(db, "storage", at)


def record_poll_failure(db: sqlite_utils.Database, source: str, error: str, at: float) -> None:
    """Keep the last good snapshot but note that `source` is failing, and since when."""
    with db.atomic():
        db.execute(
            "INSERT INTO source_status (source, error, error_at) VALUES (?, ?, ?) "
            "ON CONFLICT(source) DO UPDATE SET error = excluded.error, "
            "error_at = COALESCE(source_status.error_at, excluded.error_at)",
            [source, error, at],
        )
        _bump_version(db)


def snapshot_version(db: sqlite_utils.Database) -> int:
    row = db.execute("SELECT value FROM counters WHERE name = 'snapshot_version'").fetchone()
    return row[0] if row else 0


def load_snapshot(db: sqlite_utils.Database, rows: LoadedRows | None = None) -> ClusterSnapshot:
    """Read the latest committed snapshot (a consistent read, even while a poll writes).

    `rows`, the jobs and nodes as a reader last read them, are brought up to date with what
    polls wrote since (store/loaded_rows.py) rather than read again."""
    with db.atomic():
        version = snapshot_version(db)
        if rows is None:
            jobs = _allreadable(
                (f"job {job_id}", decode_job, record)
                for job_id, record in db.execute("SELECT job_id, record FROM jobs ORDER BY job_id")
            )
            nodes = _allreadable(
                (f"node {name}", decode_node, record)
                for name, record in db.execute("SELECT name, record FROM nodes ORDER BY name")
            )
        else:
            rows.read(db.conn)
            jobs, nodes = rows.jobs.values(), rows.nodes.values()
        cap_by_account, members = load_lab_limits(db)
        caps = tuple(LabCap(account, cap) for account, cap in cap_by_account.items())
        lab_usages = _lab_usages(db, cap_by_account, jobs, rows)
        directories = tuple(
            DirectoryUsage(
                root=r["root"],
                owner=r["owner"],
                path=r["path"],
                updated=datetime.fromisoformat(r["updated"]),
                kib=r["kib"],
                human=r["human"],
            )
            for r in db.query("SELECT * FROM directories")
        )
        filesystems = tuple(FilesystemUsage(**r) for r in db.query("SELECT * FROM filesystems"))
        previous_kib = {
            path: kib
            for path, kib in db.execute(
                "SELECT d.path, (SELECT h.kib FROM directory_history h WHERE h.path = d.path "
                "AND h.updated < d.updated ORDER BY h.updated DESC LIMIT 1) FROM directories d"
            )
            if kib is not None
        }
        status = {r["source"]: SourceStatus(**r) for r in db.query("SELECT * FROM source_status")}
        images = tuple(decode_image(r[0]) for r in db.execute("SELECT record FROM images"))
        image_dirs = [ImageDirectory(**r) for r in db.query("SELECT * FROM image_dirs")]
    for source in SOURCES:
        status.setdefault(source, SourceStatus(source))
    return ClusterSnapshot(
        jobs=jobs,
        nodes=nodes,
        caps=caps,
        directories=directories,
        filesystems=filesystems,
        previous_kib=previous_kib,
        members=members,
        status=status,
        version=version,
        images=images,
        image_dir=image_dirs[0] if image_dirs else None,
        lab_usages=lab_usages,
    )


def _allreadable(stored: Iterable[tuple[str, Callable[[str], R], str]]) -> tuple[R, ...]:
    return tuple(
        record
        for who, decode, text in stored
        if (record := readable(who, decode, text)) is not None
    )


def _lab_usages(
    db: sqlite_utils.Database,
    caps: Mapping[str, int | None],
    jobs: Sequence[Job],
    rows: LoadedRows | None,
) -> dict[tuple[str, str, str], LabUsage]:
    """The usages the last poll counted, by (lab, account, overcap account), each with its
    account's cap as of now and its waiting jobs as held in `jobs`."""
    stored = db.execute("SELECT lab, account, overcap_account, record FROM lab_usage").fetchall()
    if not stored:
        return {}
    job = rows.jobs.get if rows is not None else {each.job_id: each for each in jobs}.get
    return {
        (lab, account, overcap): decode_usage(record, lab, account, caps.get(account), job)
        for lab, account, overcap, record in stored
    }


def load_source_status(db: sqlite_utils.Database, source: str) -> SourceStatus:
    rows = list(db.query("SELECT * FROM source_status WHERE source = ?", [source]))
    return SourceStatus(**rows[0]) if rows else SourceStatus(source)


def history_start(db: sqlite_utils.Database, now: float) -> float:
    """When this store first watched Slurm (set on first call). Nothing that ended before
    then is reported: a fresh install must not DM people about last week's jobs.

    Whole seconds, rounded down as Slurm's times are: a job that ends in the same second as
    the first poll (it may have started just after the poll did) is news."""
    with db.atomic():
        db.execute(
            "INSERT OR IGNORE INTO counters (name, value) VALUES ('history_start', ?)",
            [int(now)],
        )
        return float(
            db.execute("SELECT value FROM counters WHERE name = 'history_start'").fetchone()[0]
        )


def load_lab_limits(
    db: sqlite_utils.Database,
) -> tuple[dict[str, int | None], dict[str, frozenset[str]]]:
    """GPU caps by account and members by account, as last read from sacctmgr."""
    caps = dict(db.execute("SELECT account, gpu_cap FROM lab_caps").fetchall())
    members: dict[str, set[str]] = {}
    for account, user in db.execute("SELECT account, user FROM lab_members"):
        members.setdefault(account, set()).add(user)
    return caps, {a: frozenset(u) for a, u in members.items()}


def _mark_success(db: sqlite_utils.Database, source: str, at: float) -> None:
    db.execute(
        "INSERT INTO source_status (source, taken_at, error, error_at) VALUES (?, ?, NULL, NULL) "
        "ON CONFLICT(source) DO UPDATE SET taken_at = excluded.taken_at, error = NULL, "
        "error_at = NULL",
        [source, at],
    )
    _bump_version(db)


def _bump_version(db: sqlite_utils.Database) -> None:
    db.execute(
        "INSERT INTO counters (name, value) VALUES ('snapshot_version', 1) "
        "ON CONFLICT(name) DO UPDATE SET value = value + 1"
    )


def _replace_images(
    db: sqlite_utils.Database, image_dir: ImageDirectory, images: Sequence[ContainerImage]
) -> None:
    conn = db.conn
    conn.execute("DELETE FROM image_dirs")
    conn.execute(
        "INSERT INTO image_dirs (path, error) VALUES (?, ?)", [image_dir.path, image_dir.error]
    )
    conn.execute("DELETE FROM images")
    conn.executemany(
        "INSERT INTO images (name, record) VALUES (?, ?)",
        ((image.name, encode_record(image)) for image in images),
    )


def _directory_row(d: DirectoryUsage) -> dict[str, Any]:
    row = asdict(d)
    row["updated"] = d.updated.isoformat()
    return row
