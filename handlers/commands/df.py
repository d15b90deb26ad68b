"""`/sky df`: how full each lab storage filesystem is, fullest first (like `df -h`)."""

from __future__ import annotations

from core.records import FilesystemUsage
from core.view import ClusterView
from handlers.commands.common import answer, format_bytes, literal, require_data, shown
from handlers.reply import Reply
from handlers.router import Command, CommandRequest, UsageError

USAGE = "df"
# The guide asks users to check free space before writing a lot; flag filesystems this full.
WARN_PERCENT = 90.0


def run(request: CommandRequest, view: ClusterView) -> Reply:
    if request.args:
        raise UsageError(
            f"`/sky df` takes no arguments (got {shown(' '.join(request.args))}). "
            "For one lab's or user's directories, try `/sky disk LAB` or `/sky disk USER`."
        )
    require_data(view, "storage")
    filesystems = sorted(view.snapshot.filesystems, key=lambda f: (-f.percent_used, f.mount))
    if not filesystems:
        lines = ["No storage filesystems reported: no lab has storage roots configured."]
    else:
        lines = [filesystem_line(view, f) for f in filesystems]
    return answer(view, request, lines, "storage")


def filesystem_line(view: ClusterView, fs: FilesystemUsage) -> str:
    """'⚠️ `/srv/x` 95% full — 2.7T free of 55T (hoffman-lab)'."""
    marker = "⚠️ " if fs.percent_used >= WARN_PERCENT else ""
    owners = [lab.name for lab in view.labs if fs.mount in lab.storage_roots]
    whose = f" ({literal(', '.join(owners))})" if owners else ""
    return (
        f"{marker}{literal(fs.mount)} {fs.percent_used:.0f}% full — "
        f"{format_bytes(fs.avail_bytes)} free of {format_bytes(fs.size_bytes)}{whose}"
    )


COMMAND = Command(
    "df",
    USAGE,
    "fill level and free space of each lab storage filesystem, fullest first",
    run,
    f"⚠️ marks filesystems {WARN_PERCENT:.0f}% full or more. Check before writing a lot of data.",
    same_for=lambda args, asker: None,  # the cluster's, the same for everyone
)
