"""The job and node rows a reader holds decoded, brought up to date after each poll.

A poll changes a few percent of 100,000 jobs. Reading every row again held the bot's
interpreter for about 200 ms a poll, so a reader asks only for the rows written or deleted
since the rows version it holds (store/row_log.py), and decodes only those. Reading
everything (its first read, or after a full replacement) still reuses the record of each
row whose text did not change: decoding them all again would hold the interpreter for most
of a second, and double the memory while both copies live.

Each row's hash is kept apart from its record: a dict of ints is not tracked by the garbage
collector, while 100,000 new (hash, Job) pairs per read would set off full collections that
stop the event loop for 100 ms.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from core.record_codec import decode_job, decode_node
from core.records import Job, Node
from store.row_log import RowChanges, changes_since, rows_version
from store.unreadable import UNREADABLE, name_unreadable

K = TypeVar("K", int, str)
R = TypeVar("R")


class DecodedRows(Generic[K, R]):
    """One table's records by key, in key order, as last read."""

    def __init__(self, decode: Callable[[str], R], kind: str) -> None:
        self._decode = decode
        self._kind = kind
        self._records: dict[K, R] = {}
        self._hashes: dict[K, int] = {}
        self._values: tuple[R, ...] | None = ()

    def replace_all(self, rows: Iterable[tuple[K, str]]) -> None:
        """Every row, in key order; a record whose text is unchanged is reused."""
        records: dict[K, R] = {}
        hashes: dict[K, int] = {}
        for key, text in rows:
            digest = hash(text)
            record = self._records.get(key)
            if record is None or self._hashes.get(key) != digest:
                record = self._decoded(key, text)
                if record is None:
                    continue
            records[key] = record
            hashes[key] = digest
        self._records, self._hashes, self._values = records, hashes, None

    def apply(self, changes: RowChanges) -> None:
        """Deletions first: a key deleted and written again since is written after."""
        if not changes.gone and not changes.written:
            return
        for key in changes.gone:
            self._records.pop(key, None)
            self._hashes.pop(key, None)
        # Written rows come in key order; a new key below the highest one held (an old job
        # id seen for the first time) is the only way the records can leave key order.
        highest = next(reversed(self._records), None)
        in_order = True
        for key, text in changes.written:
            record = self._decoded(key, text)
            if record is None:
                self._records.pop(key, None)
                self._hashes.pop(key, None)
                continue
            if highest is not None and key < highest and key not in self._records:
                in_order = False
            self._records[key] = record
            self._hashes[key] = hash(text)
        if not in_order:
            self._records = dict(sorted(self._records.items()))
        self._values = None

    def _decoded(self, key: K, text: str) -> R | None:
        """A row's record; None, named once, for one that does not decode: it costs only
        itself, not every reader's load."""
        try:
            return self._decode(text)
        except UNREADABLE as error:
            name_unreadable(f"{self._kind} {key}", error)
            return None

    @property
    def get(self) -> Callable[[K], R | None]:
        """A record by key, or None: the held dict's own lookup (no Python call per key),
        valid until the next read changes the records."""
        return self._records.get

    def values(self) -> tuple[R, ...]:
        """The records in key order; the same tuple until a read changes something."""
        if self._values is None:
            self._values = tuple(self._records.values())
        return self._values


@dataclass
class LoadedRows:
    """The jobs and nodes as of rows version `version` (None: nothing read yet)."""

    jobs: DecodedRows[int, Job] = field(default_factory=lambda: DecodedRows(decode_job, "job"))
    nodes: DecodedRows[str, Node] = field(default_factory=lambda: DecodedRows(decode_node, "node"))
    version: int | None = None

    def read(self, conn: Any, cluster: str) -> None:
        """Catch up with the cluster's committed rows (a reader holds one cluster's); call
        inside the snapshot's read transaction."""
        current = rows_version(conn, cluster)
        if self.version == current:
            return
        if self.version is not None:
            jobs = changes_since(conn, cluster, "jobs", self.version)
            nodes = changes_since(conn, cluster, "nodes", self.version)
            if jobs is not None and nodes is not None:
                self.jobs.apply(jobs)
                self.nodes.apply(nodes)
                self.version = current
                return
        self.jobs.replace_all(
            conn.execute(
                "SELECT job_id, record FROM jobs WHERE cluster = ? ORDER BY job_id", (cluster,)
            )
        )
        self.nodes.replace_all(
            conn.execute(
                "SELECT name, record FROM nodes WHERE cluster = ? ORDER BY name", (cluster,)
            )
        )
        self.version = current
