"""The storage poller lists the image directory into the store, re-reading only changed lists."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.config import parse_config
from core.records import ContainerImage, ImageDirectory
from scheduler.image_scan import PackageListCache, scan_images
from scheduler.shared_files import read_regular_file
from scheduler.storage_poller import StoragePoller
from store.caps_and_storage import save_storage
from store.db import open_db
from store.snapshots import load_snapshot
from store.writer import StoreWriter
from tests.support.factories import CLUSTER

PYTORCH_2312 = "nvcr.io_nvidia_pytorch_23.12-py3.sqsh"
PYTORCH_2003 = "nvcr.io_nvidia_pytorch_20.03-py3.sqsh"
HF = "huggingface+transformers-pytorch-gpu+latest.sqsh"
CUDA = "nvcr.io_nvidia_cuda_11.8.0-devel-ubuntu22.04.sqsh"


@pytest.fixture
def enroot(tmp_path: Path) -> Path:
    """An image directory like the guide's: empty .sqsh stand-ins, real-looking lists."""
    root = tmp_path / "enroot"
    root.mkdir()
    for name in (PYTORCH_2312, PYTORCH_2003, HF, CUDA):
        (root / name).touch()
    (root / f"{PYTORCH_2312}.packages").write_text(
        "torch==2.2.0a0+81ea7a4\ntorchvision==0.17.0a0\nnumpy==1.24.4\n"
    )
    (root / f"{PYTORCH_2003}.packages").write_text("torch==1.5.0a0+8f84ded\nnumpy==1.18.1\n")
    # The `<stem>.packages` spelling is read too.
    (root / HF.replace(".sqsh", ".packages")).write_text(
        "torch==1.7.1\ntransformers==4.1.1\nPackage Version\n-----\n"
    )
    (root / "README.txt").write_text("not an image\n")
    return root


class CountingReader:
    """The poller's file-reading seam, counting which lists it actually reads."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    def __call__(self, path: Path, max_bytes: int) -> bytes:
        self.reads.append(path.name)
        return read_regular_file(path, max_bytes)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        self.now += 300.0
        return self.now


async def test_poller_round_trip_and_only_changed_lists_are_reread(
    enroot: Path, tmp_path: Path
) -> None:
    config = parse_config({"images": {"dir": str(enroot)}})
    db_path = tmp_path / "skybot.db"
    writer = StoreWriter(db_path)
    reader = CountingReader()
    poller = StoragePoller(
        config.default_cluster, config, writer, clock=Clock(), read_packages=reader
    )
    try:
        assert await poller.poll()
        assert sorted(reader.reads) == sorted(
            [
                f"{PYTORCH_2312}.packages",
                f"{PYTORCH_2003}.packages",
                "huggingface+transformers-pytorch-gpu+latest.packages",
            ]
        )

        snapshot = load_snapshot(open_db(db_path), CLUSTER)
        assert snapshot.image_dir == ImageDirectory(str(enroot))
        by_name = {i.name: i for i in snapshot.images}
        assert sorted(by_name) == sorted([PYTORCH_2312, PYTORCH_2003, HF, CUDA])
        assert by_name[PYTORCH_2312] == ContainerImage(
            PYTORCH_2312,
            0,
            f"{PYTORCH_2312}.packages",
            (("torch", "2.2.0a0+81ea7a4"), ("torchvision", "0.17.0a0"), ("numpy", "1.24.4")),
        )
        assert by_name[HF].unreadable_lines == 2
        assert by_name[CUDA].packages_file is None and by_name[CUDA].packages == ()
        assert snapshot.source("storage").taken_at is not None

        # Nothing changed: nothing is read again, and the snapshot still has every list.
        reader.reads.clear()
        assert await poller.poll()
        assert reader.reads == []
        assert load_snapshot(open_db(db_path), CLUSTER).images == snapshot.images

        # One list grows: only it is read again.
        with (enroot / f"{PYTORCH_2003}.packages").open("a") as file:
            file.write("apex==0.1\n")
        assert await poller.poll()
        assert reader.reads == [f"{PYTORCH_2003}.packages"]
        changed = {i.name: i for i in load_snapshot(open_db(db_path), CLUSTER).images}[PYTORCH_2003]
        assert ("apex", "0.1") in changed.packages
    finally:
        writer.close()


async def test_a_missing_image_directory_is_recorded_not_fatal(tmp_path: Path) -> None:
    config = parse_config({"images": {"dir": str(tmp_path / "no-such-dir")}})
    writer = StoreWriter(tmp_path / "skybot.db")
    try:
        assert await StoragePoller(config.default_cluster, config, writer).poll()
    finally:
        writer.close()
    snapshot = load_snapshot(open_db(tmp_path / "skybot.db"), CLUSTER)
    assert snapshot.image_dir is not None
    assert snapshot.image_dir.error == "No such file or directory"
    assert snapshot.images == ()
    assert not snapshot.source("storage").failing


async def test_images_dir_empty_turns_the_listing_off(tmp_path: Path) -> None:
    config = parse_config({"images": {"dir": ""}})
    writer = StoreWriter(tmp_path / "skybot.db")
    try:
        assert await StoragePoller(config.default_cluster, config, writer).poll()
    finally:
        writer.close()
    assert load_snapshot(open_db(tmp_path / "skybot.db"), CLUSTER).image_dir == ImageDirectory("")


def test_lists_are_read_safely(enroot: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("password==hunter2\n")
    (enroot / "evil.sqsh").touch()
    os.symlink(secret, enroot / "evil.sqsh.packages")
    (enroot / "huge.sqsh").touch()
    (enroot / "huge.sqsh.packages").write_text("numpy==1.0\n" * 100)
    (enroot / "fifo.sqsh").touch()
    os.mkfifo(enroot / "fifo.sqsh.packages")

    scan = scan_images(str(enroot), 500, PackageListCache())
    by_name = {i.name: i for i in scan.images}
    assert by_name["evil.sqsh"].packages == ()
    assert "symlink" in (by_name["evil.sqsh"].packages_error or "")
    assert "over the 500 limit" in (by_name["huge.sqsh"].packages_error or "")
    assert "not a regular file" in (by_name["fifo.sqsh"].packages_error or "")
    assert by_name[PYTORCH_2312].packages_error is None


def test_failed_reads_are_retried_and_vanished_lists_forgotten(enroot: Path) -> None:
    cache = PackageListCache()
    scan_images(str(enroot), 4096, cache)
    assert len(cache) == 3
    (enroot / f"{PYTORCH_2003}.packages").unlink()
    scan = scan_images(str(enroot), 4096, cache)
    assert len(cache) == 2
    assert {i.name: i for i in scan.images}[PYTORCH_2003].packages_file is None


def test_saving_storage_without_images_keeps_the_last_image_list(tmp_path: Path) -> None:
    db = open_db(tmp_path / "skybot.db")
    image = ContainerImage(PYTORCH_2312, 5, f"{PYTORCH_2312}.packages", (("torch", "2.2.0"),))
    save_storage(db, CLUSTER, [], [], at=1.0, image_dir=ImageDirectory("/enroot"), images=[image])
    save_storage(db, CLUSTER, [], [], at=2.0)
    snapshot = load_snapshot(db, CLUSTER)
    assert snapshot.images == (image,) and snapshot.image_dir == ImageDirectory("/enroot")
    save_storage(
        db, CLUSTER, [], [], at=3.0, image_dir=ImageDirectory("/enroot", "Permission denied")
    )
    snapshot = load_snapshot(db, CLUSTER)
    assert snapshot.images == () and snapshot.image_dir.error == "Permission denied"
