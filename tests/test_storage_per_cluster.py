"""Storage per cluster (issue 38): each cluster's storage poll replaces only its own rows.

Before, every cluster's poll rewrote the one set of storage tables: a cluster with no storage
roots (the README's own nova) blanked the other's, and `/sky df` said "no lab has storage
roots configured" most of the time. A database from before is upgraded in place, each row
going to the cluster whose roots it lies on.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
import sqlite_utils

from bot.adoption import adopt_rows, storage_roots
from core.chart_specs import LAB_DISK, ChartSpec
from core.cluster_config import ClusterConfig, LabConfig
from core.config_schema import Config, parse_config
from scheduler.chart_maker import ChartMaker
from scheduler.storage_poller import StoragePoller
from scheduler.watchers.storage import storage_alerts_in_db
from store.caps_and_storage import save_storage
from store.cluster_schema import STORAGE_KEYS
from store.db import MIGRATIONS, migrate, open_db
from store.history import directory_growth
from store.outbox import outbox_rows
from store.snapshots import load_snapshot
from store.writer import StoreWriter
from tests.support.factories import directory_usage, filesystem_usage

REPORT = "Updated: 2024-05-06 03:00\nUsage (human-readable): 5.0G\nUsage (K): {kib}\n"


def lab(name: str, *roots: str) -> dict[str, object]:
    return {"name": name, "partition": name, "account": name, "storage_roots": list(roots)}


def two_clusters(tmp_path: Path, nova_roots: tuple[str, ...] = ()) -> Config:
    return parse_config(
        {
            "database": {"path": str(tmp_path / "skybot.db")},
            "notifications": {"hoard_top_n": 1},
            "clusters": [
                {"name": "skynet", "labs": [lab("hoffman-lab", str(tmp_path / "flash9"))]},
                {"name": "nova", "labs": [lab("kira-lab", *nova_roots)]},
            ],
        }
    )


def user_directory(root: Path, user: str, kib: int) -> None:
    home = root / user
    home.mkdir(parents=True)
    (home / "disk-usage.txt").write_text(REPORT.format(kib=kib))


def on(config: Config, name: str) -> ClusterConfig:
    cluster = config.cluster_named(name)
    assert cluster is not None
    return cluster


async def test_a_cluster_without_storage_roots_leaves_the_others_storage_alone(
    tmp_path: Path,
) -> None:
    user_directory(tmp_path / "flash9", "alice", 5 * 1024**2)
    config = two_clusters(tmp_path)
    writer = StoreWriter(tmp_path / "skybot.db")
    try:
        skynet = StoragePoller(on(config, "skynet"), config, writer)
        nova = StoragePoller(on(config, "nova"), config, writer)
        for at in (1.0, 2.0, 3.0):
            # Several polls of each, in either order: the last one never blanks the other's.
            assert await skynet.poll() and await nova.poll()
            skynet_view = await writer.run(load_snapshot, "skynet")
            assert [f.mount for f in skynet_view.filesystems] == [str(tmp_path / "flash9")], at
            assert [d.owner for d in skynet_view.directories] == ["alice"]
            nova_view = await writer.run(load_snapshot, "nova")
            assert nova_view.filesystems == () and nova_view.directories == ()
            assert nova_view.source("storage").taken_at is not None
    finally:
        writer.close()


def test_each_clusters_history_and_growth_are_its_own(tmp_path: Path) -> None:
    db = open_db(tmp_path / "skybot.db")
    root = "/srv/shared"
    week1 = directory_usage("alice", 1024, root=root)
    week2 = directory_usage("alice", 4096, root=root, updated=week1.updated.replace(day=13))
    # The same path on both clusters: nova's reports do not move skynet's figures.
    save_storage(db, "skynet", [week1], [filesystem_usage(root, 10, 1)], at=1.0)
    save_storage(db, "nova", [week2], [filesystem_usage(root, 10, 9)], at=2.0)
    save_storage(db, "skynet", [week1], [filesystem_usage(root, 10, 1)], at=3.0)
    assert load_snapshot(db, "skynet").filesystems[0].percent_used == 10.0
    assert load_snapshot(db, "nova").filesystems[0].percent_used == 90.0
    assert load_snapshot(db, "skynet").previous_kib == {}
    assert directory_growth(db, "skynet", [root], 0, 2e9) == {f"{root}/alice": (1024, 1024)}
    assert directory_growth(db, "nova", [root], 0, 2e9) == {f"{root}/alice": (4096, 4096)}


async def test_storage_alerts_name_the_cluster_and_keep_their_state_per_cluster(
    tmp_path: Path,
) -> None:
    root = "/srv/shared"
    config = two_clusters(tmp_path)
    writer = StoreWriter(tmp_path / "skybot.db")
    try:
        for cluster in ("skynet", "nova"):
            await writer.run(
                save_storage,
                cluster,
                [directory_usage("alice", 20 * 1024**3, root=root)],
                [filesystem_usage(root, 55, 53)],
                100.0,
            )
        for cluster in ("skynet", "nova"):
            snapshot = await writer.run(load_snapshot, cluster)
            here = on(config, cluster)
            assert await writer.run(storage_alerts_in_db, snapshot, {}, config, here) == 2
            # The same readings again: this cluster's state says told, whatever the other's.
            assert await writer.run(storage_alerts_in_db, snapshot, {}, config, here) == 0
        rows = await writer.run(outbox_rows)
        keys = sorted(r["key"] for r in rows)
        assert keys == sorted(
            [
                f"fs:nova:{root}:95:1",
                f"fs:skynet:{root}:95:1",
                f"hoard:nova:{root}/alice:2024-05-06T03:00:00",
                f"hoard:skynet:{root}/alice:2024-05-06T03:00:00",
            ]
        )
        nova_fill = next(r["text"] for r in rows if r["key"].startswith("fs:nova"))
        assert nova_fill.startswith(f"🟠 `{root}` on cluster `nova` is 96% full"), nova_fill
        nova_hoard = next(r["text"] for r in rows if r["key"].startswith("hoard:nova"))
        assert f"`{root}/alice` on cluster `nova` holds" in nova_hoard, nova_hoard
    finally:
        writer.close()


async def test_a_disk_chart_is_drawn_from_its_labs_cluster_and_says_which(
    tmp_path: Path,
) -> None:
    root = "/srv/shared"
    config = two_clusters(tmp_path, nova_roots=(root,))
    writer = StoreWriter(tmp_path / "skybot.db")
    try:
        week = directory_usage("alice", 4 * 1024**2, root=root)
        await writer.run(save_storage, "nova", [week], [], 1.0)
        await writer.run(save_storage, "skynet", [week], [], 1.0)
        # The configuration as `skybot run` has it (its top-level labs are skynet's).
        chart = await ChartMaker(config, writer)(ChartSpec(LAB_DISK, "kira-lab", 0, 2e9))
        assert chart.title == "kira-lab on cluster nova: growth of the largest directories"
        assert "alice" in chart.alt_text
    finally:
        writer.close()


async def test_storage_rows_from_before_go_to_the_cluster_whose_roots_they_lie_on(
    tmp_path: Path,
) -> None:
    """A live database of the previous schema (shared storage tables) upgrades in place:
    nothing is lost, and each row is named after the cluster whose labs' roots hold it."""
    path = tmp_path / "skybot.db"
    old = sqlite3.connect(path)
    before = sqlite_utils.Database(old)
    migrate(before, MIGRATIONS[: MIGRATIONS.index(STORAGE_KEYS)])
    rows: dict[str, list[tuple[object, ...]]] = {
        "directories": [
            ("/a/alice", "/a", "alice", "2024-05-06T03:00:00", 5, "5K"),
            ("/b/bob", "/b", "bob", "2024-05-06T03:00:00", 7, "7K"),
            ("/c/carol", "/c", "carol", "2024-05-06T03:00:00", 9, "9K"),
        ],
        "filesystems": [("/a", 100, 10, 90), ("/b", 100, 20, 80)],
        "directory_history": [("/a/alice", "2024-05-06T03:00:00", 5), ("/b/bob", "x", 7)],
        "filesystem_history": [(1.0, "/a", 10, 100), (1.0, "/b", 20, 100)],
        "hoard_alerts": [("/b/bob", "2024-05-06T03:00:00", 7)],
        "filesystem_alerts": [("/a", 90.0, 1)],
    }
    for table, values in rows.items():
        marks = ", ".join("?" for _ in values[0])
        old.executemany(f"INSERT INTO {table} VALUES ({marks})", values)
    old.commit()
    old.close()

    config = parse_config(
        {
            "database": {"path": str(path)},
            "clusters": [
                {"name": "skynet", "labs": [lab("hoffman-lab", "/a")]},
                {"name": "nova", "labs": [lab("kira-lab", "/b")]},
            ],
        }
    )
    assert storage_roots(config) == {"skynet": ["/a"], "nova": ["/b"]}
    writer = StoreWriter(path)
    try:
        assert await adopt_rows(config, writer) > 0
        assert await adopt_rows(config, writer) == 0  # idempotent: every start may call it
        skynet = await writer.run(load_snapshot, "skynet")
        nova = await writer.run(load_snapshot, "nova")
        # On no configured root: the default cluster's, as every other unnamed row.
        assert sorted(d.owner for d in skynet.directories) == ["alice", "carol"]
        assert [d.owner for d in nova.directories] == ["bob"]
        assert [f.mount for f in skynet.filesystems] == ["/a"]
        assert [f.mount for f in nova.filesystems] == ["/b"]

        def by_cluster(db: object, table: str) -> dict[str, int]:
            query = f"SELECT cluster, COUNT(*) FROM {table} GROUP BY cluster"
            return dict(db.execute(query).fetchall())  # type: ignore[attr-defined]

        assert await writer.run(by_cluster, "hoard_alerts") == {"nova": 1}
        assert await writer.run(by_cluster, "filesystem_alerts") == {"skynet": 1}
        assert await writer.run(by_cluster, "filesystem_history") == {"skynet": 1, "nova": 1}
        assert await writer.run(by_cluster, "directory_history") == {"skynet": 1, "nova": 1}
    finally:
        writer.close()


def test_a_lab_on_the_default_cluster_keeps_the_top_levels_roots(tmp_path: Path) -> None:
    config = two_clusters(tmp_path)
    replaced = msgspec.structs.replace(config, labs=(LabConfig("x", "x", "x", ("/x",)),))
    assert storage_roots(replaced)["skynet"] == ["/x"]
    assert isinstance(config.cluster_named("nova"), ClusterConfig)
