"""Listing the container image directory: every `*.sqsh` and its `.packages` list.

Runs in the storage poller's worker thread, never on a command's path. The lists are read as
strictly as users' disk-usage.txt files (no symlinks, no FIFOs, a size cap): the directory is
the admins', but one careless symlink must not make the bot read an arbitrary file or hang.
A list is re-read only when its size or mtime changed, since a directory of hundreds of images
changes only when an admin adds one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from core.packages import PackageList, parse_packages
from core.records import ContainerImage, ImageDirectory
from scheduler.shared_files import SharedFileError, read_regular_file

IMAGE_SUFFIX = ".sqsh"
# The container guide's lists are `<image>.sqsh.packages`; `<stem>.packages` is also accepted.
LIST_SUFFIXES = (IMAGE_SUFFIX + ".packages", ".packages")

# Reads a list's bytes (path, max_bytes); a parameter so tests can count the reads.
ListReader = Callable[[Path, int], bytes]
# What identifies one version of a list without reading it: (st_mtime_ns, st_size).
FileKey = tuple[int, int]


class PackageListCache:
    """Parsed lists by path, each with the (mtime_ns, size) it was read at."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[FileKey, PackageList]] = {}

    def get(self, path: str, key: FileKey) -> PackageList | None:
        entry = self._entries.get(path)
        return entry[1] if entry is not None and entry[0] == key else None

    def put(self, path: str, key: FileKey, packages: PackageList) -> None:
        self._entries[path] = (key, packages)

    def retain(self, paths: Iterable[str]) -> None:
        """Forget lists that are gone, so the cache never outgrows the directory."""
        keep = set(paths)
        self._entries = {p: e for p, e in self._entries.items() if p in keep}

    def __len__(self) -> int:
        return len(self._entries)


@dataclass
class ImageScan:
    directory: ImageDirectory
    images: list[ContainerImage]


def scan_images(
    directory: str,
    max_list_bytes: int,
    cache: PackageListCache,
    read: ListReader = read_regular_file,
) -> ImageScan:
    """Every image in `directory` with its package list (blocking; run in a thread)."""
    try:
        with os.scandir(directory) as listing:
            entries = {entry.name: entry for entry in listing}
    except OSError as error:
        return ImageScan(ImageDirectory(directory, error.strerror or str(error)), [])
    images: list[ContainerImage] = []
    lists_seen: list[str] = []
    for name in sorted(entries):
        entry = entries[name]
        if not name.endswith(IMAGE_SUFFIX):
            continue
        try:
            # An image may be a symlink (a "latest" alias): only its name and size are used.
            if not entry.is_file():
                continue
            size = entry.stat().st_size
        except OSError:
            continue  # removed while we listed
        list_entry = _list_of(name, entries)
        if list_entry is None:
            images.append(ContainerImage(name, size))
            continue
        lists_seen.append(list_entry.path)
        images.append(_with_list(name, size, list_entry, max_list_bytes, cache, read))
    cache.retain(lists_seen)
    return ImageScan(ImageDirectory(directory), images)


def _list_of(image: str, entries: dict[str, os.DirEntry[str]]) -> os.DirEntry[str] | None:
    stem = image.removesuffix(IMAGE_SUFFIX)
    for suffix in LIST_SUFFIXES:
        entry = entries.get(stem + suffix)
        if entry is not None:
            return entry
    return None


def _with_list(
    name: str,
    size: int,
    list_entry: os.DirEntry[str],
    max_list_bytes: int,
    cache: PackageListCache,
    read: ListReader,
) -> ContainerImage:
    try:
        info = list_entry.stat(follow_symlinks=False)
        key = (info.st_mtime_ns, info.st_size)
        packages = cache.get(list_entry.path, key)
        if packages is None:
            packages = parse_packages(read(Path(list_entry.path), max_list_bytes))
            cache.put(list_entry.path, key, packages)
    except (SharedFileError, OSError) as error:
        # Not cached: a failed read (a list being rewritten, an NFS hiccup) is retried next poll.
        reason = error.strerror if isinstance(error, OSError) else str(error)
        return ContainerImage(name, size, list_entry.name, packages_error=reason or "unreadable")
    return ContainerImage(
        name,
        size,
        list_entry.name,
        packages=packages.packages,
        unreadable_lines=packages.unreadable_lines,
    )
