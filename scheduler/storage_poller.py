"""The storage poller: weekly disk-usage.txt reports and each filesystem's fill level.

Directory reports are written by an admin cron job into every user directory; the directories
themselves belong to users, so every read refuses symlinks and oversized files (a user could
otherwise point skybot at any file it can read, or at /dev/zero). The same scan lists the
container image directory (scheduler/image_scan.py) for `/sky images`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from core.cluster_config import ClusterConfig
from core.disk_usage import DiskUsageError, parse_disk_usage
from core.records import ContainerImage, DirectoryUsage, FilesystemUsage, ImageDirectory
from core.shared_config import SharedConfig
from scheduler.backoff import Backoff
from scheduler.image_scan import ListReader, PackageListCache, scan_images
from scheduler.shared_files import (
    SharedFileError,
    SharedFileMissing,
    read_regular_file,
    read_utf8_file,
)
from store.caps_and_storage import save_storage
from store.snapshots import record_poll_failure
from store.writer import StoreWriter

log = logging.getLogger(__name__)

USAGE_FILE = "disk-usage.txt"


@dataclass
class StorageScan:
    directories: list[DirectoryUsage] = field(default_factory=list)
    filesystems: list[FilesystemUsage] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # The image directory as listed; its path is "" when the listing is turned off.
    image_dir: ImageDirectory | None = None
    images: list[ContainerImage] = field(default_factory=list)


def scan_storage(roots: Iterable[str], max_file_bytes: int) -> StorageScan:
    """Read every root's per-user reports and its filesystem size (blocking; run in a thread)."""
    scan = StorageScan()
    for root in roots:
        try:
            scan.filesystems.append(filesystem_usage(root))
            entries = sorted(os.scandir(root), key=lambda e: e.name)
        except OSError as error:
            scan.errors.append(f"{root}: {error.strerror}")
            continue
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            report = Path(entry.path) / USAGE_FILE
            try:
                text = read_utf8_file(report, max_file_bytes)
                scan.directories.append(parse_disk_usage(text, root, entry.name, entry.path))
            except (SharedFileMissing, FileNotFoundError):
                # New directories have no report until the weekly job first runs.
                continue
            except (SharedFileError, DiskUsageError, OSError) as error:
                scan.warnings.append(f"{report}: {error}")
    return scan


def filesystem_usage(mount: str) -> FilesystemUsage:
    stats = os.statvfs(mount)
    size = stats.f_blocks * stats.f_frsize
    free = stats.f_bfree * stats.f_frsize
    return FilesystemUsage(
        mount=mount,
        size_bytes=size,
        used_bytes=size - free,
        avail_bytes=stats.f_bavail * stats.f_frsize,
    )


class StoragePoller:
    """Polls one cluster's storage: its labs' roots (and the image directory), into its rows."""

    def __init__(
        self,
        cluster: ClusterConfig,
        shared: SharedConfig,
        writer: StoreWriter,
        clock: Callable[[], float] = time.time,
        read_packages: ListReader = read_regular_file,
    ) -> None:
        self.cluster = cluster.name
        self._labs = cluster.labs
        self._storage = shared.storage
        self._images = shared.images
        self._writer = writer
        self._clock = clock
        self._backoff = Backoff(base_seconds=shared.storage.poll_seconds, max_seconds=3600)
        self._read_packages = read_packages
        # Only touched from inside _scan, and polls never overlap, so it needs no lock.
        self._package_lists = PackageListCache()

    @property
    def roots(self) -> list[str]:
        return [root for lab in self._labs for root in lab.storage_roots]

    async def poll(self) -> bool:
        now = self._clock()
        if self._backoff.should_skip(now):
            return False
        scan = await asyncio.to_thread(self._scan)
        for warning in scan.warnings:
            log.warning("storage: %s", warning)
        if scan.errors and not scan.filesystems:
            delay = self._backoff.failed(now)
            message = "; ".join(scan.errors)
            log.warning("storage poll failed (next try in %.0f s): %s", delay, message)
            await self._writer.run(record_poll_failure, self.cluster, "storage", message, now)
            return False
        for error in scan.errors:
            log.warning("storage root unreadable: %s", error)
        if scan.image_dir is not None and scan.image_dir.error:
            log.warning("image directory %s: %s", scan.image_dir.path, scan.image_dir.error)
        await self._writer.run(
            save_storage,
            self.cluster,
            scan.directories,
            scan.filesystems,
            now,
            image_dir=scan.image_dir,
            images=scan.images,
        )
        self._backoff.succeeded()
        return True

    def _scan(self) -> StorageScan:
        """The lab storage and the image directory, in one worker thread."""
        images = self._images
        scan = scan_storage(self.roots, self._storage.max_usage_file_bytes)
        if images.dir:
            listed = scan_images(
                images.dir, images.max_packages_file_bytes, self._package_lists, self._read_packages
            )
            scan.image_dir, scan.images = listed.directory, listed.images
        else:
            # Turned off: recorded as such, so `/sky images` can say so rather than "not yet".
            scan.image_dir = ImageDirectory("")
        return scan
