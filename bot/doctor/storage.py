"""Storage: each lab's storage roots and the images directory, listable by the service user."""

from __future__ import annotations

import os

from bot.adoption import cluster_labs
from bot.config import Config
from bot.doctor.checklist import Check
from bot.doctor.service_user import COMMAND_TIMEOUT_SECONDS, ServiceUser, run_command


async def _listable_by(path: str, user: ServiceUser) -> bool:
    if user.is_me:
        try:
            with os.scandir(path):
                return True
        except OSError:
            return False
    status, _ = await run_command(
        [*user.prefix(), "/usr/bin/test", "-r", path, "-a", "-x", path], COMMAND_TIMEOUT_SECONDS
    )
    return status == 0


async def check_storage_root(lab: str, root: str, user: ServiceUser) -> Check:
    name = f"storage {lab}"
    if not os.path.exists(root):
        return Check(
            name,
            False,
            f"{root} does not exist",
            f"Mount the filesystem at {root}, or correct the lab's storage_roots.",
        )
    if not os.path.isdir(root):
        return Check(
            name,
            False,
            f"{root} is not a directory",
            f"Point the lab's storage_roots at the directory, not {root}.",
        )
    if not await _listable_by(root, user):
        return Check(
            name,
            False,
            f"{root} cannot be listed by {user.name}",
            f"Grant {user.name} read and search access to {root} (e.g. a group or an "
            "ACL), so the weekly disk-usage.txt reports can be read.",
        )
    stats = os.statvfs(root)
    used = 100 * (1 - stats.f_bfree / stats.f_blocks) if stats.f_blocks else 0.0
    return Check(name, True, f"{root} is readable by {user.name} ({used:.0f}% full)")


async def check_storage(config: Config, user: ServiceUser) -> list[Check]:
    # Every cluster's labs (the default's as the top level has them).
    labs = [lab for cluster in config.clusters for lab in cluster_labs(config, cluster).labs]
    checks = [
        await check_storage_root(lab.name, root, user) for lab in labs for root in lab.storage_roots
    ]
    checks = checks or [Check("storage", True, "no storage roots configured", warning=True)]
    if config.images.dir:
        checks.append(await check_image_dir(config.images.dir, user))
    return checks


async def check_image_dir(path: str, user: ServiceUser) -> Check:
    """`/sky images` lists this directory; "" in the config turns it off."""
    fix = (
        f"Point images.dir at the directory of *.sqsh images users run, make it listable by "
        f'{user.name}, or set images.dir = "" to turn /sky images off.'
    )
    if not os.path.isdir(path):
        return Check("images", False, f"{path} is not a directory", fix)
    if not await _listable_by(path, user):
        return Check("images", False, f"{path} cannot be listed by {user.name}", fix)
    count = sum(1 for name in os.listdir(path) if name.endswith(".sqsh"))
    return Check("images", True, f"{path} is readable by {user.name} ({count} images)")
