"""`/sky disk [LAB|USER]`: the largest directories, from the weekly disk-usage.txt reports.

Sizes are what the admins' weekly script wrote (its human-readable figure); totals, order and
growth come from the exact KiB counts of this report and the one before it.
"""

from __future__ import annotations

from core.chart_specs import LAB_DISK, ChartSpec
from core.cluster_config import LabConfig
from core.records import DirectoryUsage
from core.view import ClusterView
from handlers.commands.common import (
    answer,
    at_most_one,
    bounded,
    did_you_mean,
    format_kib,
    known_users,
    lab_names,
    literal,
    not_linked,
    require_data,
    shown,
)
from handlers.commands.df import filesystem_line
from handlers.reply import Reply
from handlers.router import Command, CommandRequest, UsageError

USAGE = "disk [LAB|USER] [--chart]"
MAX_DIRECTORIES = 15
# Weekly reports: twelve points make a readable trend.
CHART_DAYS = 84


def run(request: CommandRequest, view: ClusterView) -> Reply:
    arg = at_most_one(request, USAGE)
    if arg is None and not request.cluster_user:
        raise not_linked(USAGE)
    require_data(view, "storage")
    lab = view.lab(arg) if arg is not None else None
    if lab is not None:
        lines = _lab_lines(view, lab)
    else:
        lines = user_lines(view, arg or request.cluster_user or "", asker=arg is None)
    return answer(view, request, lines, "storage")


def charts(request: CommandRequest, view: ClusterView) -> list[ChartSpec]:
    """`--chart`: how the lab's largest directories grew over the last weeks' reports."""
    arg = at_most_one(request, USAGE)
    if arg is not None:
        lab = view.lab(arg)
        if lab is None:
            raise UsageError(
                f"Disk charts are drawn per lab, and {shown(arg)} is not one: "
                f"`/sky disk LAB --chart`. Labs: {lab_names(view)}."
            )
        labs = [lab]
    else:
        if not request.cluster_user:
            raise not_linked(USAGE)
        labs = view.labs_of_user(request.cluster_user)
        if not labs:
            raise UsageError("I don't know your lab — name one: `/sky disk LAB --chart`.")
    since = request.now - CHART_DAYS * 86400
    return [ChartSpec(LAB_DISK, lab.name, since, request.now) for lab in labs]


def _lab_lines(view: ClusterView, lab: LabConfig) -> list[str]:
    if not lab.storage_roots:
        return [f"skybot has no storage roots configured for *{literal(lab.name)}*."]
    dirs = [d for d in view.snapshot.directories if d.root in lab.storage_roots]
    roots = ", ".join(f"{literal(r)}" for r in lab.storage_roots)
    head = f"*{literal(lab.name)}*: {_total(dirs)} on {roots}"
    fs_lines = [
        f"    {filesystem_line(view, fs)}"
        for fs in view.snapshot.filesystems
        if fs.mount in lab.storage_roots
    ]
    return [head, *fs_lines, *_directory_lines(view, dirs, with_owner=True)]


def user_lines(
    view: ClusterView, user: str, asker: bool, limit: int = MAX_DIRECTORIES
) -> list[str]:
    """A user's total and largest directories (at most `limit`); asker: "you have none"."""
    dirs = [d for d in view.snapshot.directories if d.owner == user]
    if dirs:
        largest = _directory_lines(view, dirs, with_owner=False, limit=limit)
        return [f"*{literal(user)}*: {_total(dirs)}", *largest]
    if asker:
        return [
            f"skybot has no disk-usage reports for your directories ({literal(user)}). A report "
            "appears after the weekly scan of `/srv/<lab>/<storage>/<user>`."
        ]
    hint = did_you_mean(user, [*(lab.name for lab in view.labs), *known_users(view)])
    maybe = f" Did you mean {literal(hint)}?" if hint else ""
    raise UsageError(f"I have no disk-usage reports for a lab or user called {shown(user)}.{maybe}")


def _total(dirs: list[DirectoryUsage]) -> str:
    noun = "directory" if len(dirs) == 1 else "directories"
    return f"{format_kib(sum(d.kib for d in dirs))} in {len(dirs)} {noun}"


def _directory_lines(
    view: ClusterView,
    dirs: list[DirectoryUsage],
    with_owner: bool,
    limit: int = MAX_DIRECTORIES,
) -> list[str]:
    largest = sorted(dirs, key=lambda d: (-d.kib, d.path))
    return bounded(
        [
            f"    {literal(d.path, 120)} {literal(d.human)}"
            + _growth(view, d)
            + (f" ({literal(d.owner)})" if with_owner else "")
            + f" · updated {d.updated:%Y-%m-%d}"
            for d in largest
        ],
        limit,
    )


def _growth(view: ClusterView, directory: DirectoryUsage) -> str:
    before = view.snapshot.previous_kib.get(directory.path)
    if before is None:
        return ""
    change = directory.kib - before
    if change == 0:
        return " (unchanged since the last report)"
    sign = "+" if change > 0 else "-"
    return f" ({sign}{format_kib(abs(change))} since the last report)"


COMMAND = Command(
    "disk",
    USAGE,
    "largest directories of a lab or user (yours by default), from the weekly reports",
    run,
    "Figures come from each directory's disk-usage.txt, which the admins update weekly. "
    f"`--chart` draws how a lab's largest directories grew over the last {CHART_DAYS // 7} "
    "weekly reports.",
    charts=charts,
)
