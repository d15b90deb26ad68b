"""`/sky images [QUERY] [--gpu TYPE]`: the container images, or those with a package.

Answers from the image list the storage poller keeps in the snapshot (it reads the image
directory and each image's `.packages` list); asking never touches the filesystem. Query rules
(PEP 440, `==2.1` also matching 2.1.x) are in core/packages.py; releases and GPU minimums in
core/images.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.images import GpuRule, Release, find_gpu_rule, image_release
from core.packages import (
    PackageIndex,
    PackageMatch,
    PackageQuery,
    QueryError,
    build_index,
    describe_versions,
    find_images,
    parse_query,
    versions_of,
)
from core.records import ContainerImage
from core.view import ClusterView
from handlers.commands.common import (
    answer,
    bounded,
    did_you_mean,
    literal,
    one_line,
    require_data,
    shown,
)
from handlers.reply import Reply
from handlers.router import Command, CommandRequest, UsageError

USAGE = "images [QUERY] [--gpu TYPE]"
# Images named in one "not searched" note before "and N more".
MAX_NAMED = 5
# Notes about unreadable lists shown under a search.
MAX_NOTES = 5


def run(request: CommandRequest, view: ClusterView) -> Reply:
    query_text, gpu_word = _split_args(request.args)
    query = _query(query_text) if query_text else None
    rule = _gpu_rule(view, gpu_word) if gpu_word is not None else None
    require_data(view, "storage")
    return answer(view, request, _lines(view, query, rule), "storage")


def _lines(view: ClusterView, query: PackageQuery | None, rule: GpuRule | None) -> list[str]:
    directory = view.snapshot.image_dir
    if directory is None:
        # A snapshot from before this skybot listed images: the next storage scan will.
        return [
            "skybot has not listed the container images yet — try again after the next "
            "storage scan (a few minutes)."
        ]
    if not directory.path:
        return ["Listing container images is turned off in skybot's configuration (`[images]`)."]
    where = f"{literal(directory.path)}"
    if directory.error:
        return [
            f"skybot cannot read the image directory {where}: {one_line(directory.error)}. "
            "The admins can check it (and skybot's `[images] dir` setting)."
        ]
    if not view.snapshot.images:
        return [f"There are no container images (`*.sqsh`) in {where}."]
    if query is None:
        return _listing(view, where, rule)
    return _search(view, query, rule)


# ---------------------------------------------------------------- arguments


def _split_args(args: Sequence[str]) -> tuple[str | None, str | None]:
    """(query text, --gpu value) from the words after `images`."""
    words: list[str] = []
    gpu: str | None = None
    rest = iter(args)
    for word in rest:
        if word == "--gpu" or word.startswith("--gpu="):
            value = word.partition("=")[2] if "=" in word else next(rest, "")
            if gpu is not None:
                raise UsageError("Give `--gpu` only once.")
            if not value.strip() or value.startswith("--"):
                raise UsageError(
                    f"`--gpu` needs a GPU type, e.g. `--gpu a100`. Usage: `/sky {USAGE}`."
                )
            gpu = value
        elif word.startswith("--"):
            raise UsageError(f"I don't know the option {shown(word)}. Usage: `/sky {USAGE}`")
        else:
            words.append(word)
    return (" ".join(words) or None), gpu


def _query(text: str) -> PackageQuery:
    try:
        return parse_query(text)
    except QueryError as error:
        raise UsageError(
            f"I can't read {shown(text)} as a package query: {error}. "
            "Examples: `torch`, `torch==2.1`, `transformers>=4.30`."
        ) from None


def _gpu_rule(view: ClusterView, word: str) -> GpuRule:
    rule = find_gpu_rule(view.gpu_min_release, word)
    if rule is not None:
        return rule
    known = ", ".join(f"{literal(t)}" for t in view.gpu_min_release) or "none are configured"
    raise UsageError(
        f"I don't know which images GPU type {shown(word)} needs. GPU types with a minimum "
        f"image release: {known}."
    )


# ---------------------------------------------------------------- answers


def _listing(view: ClusterView, where: str, rule: GpuRule | None) -> list[str]:
    images = sorted(view.snapshot.images, key=lambda i: _newest_first(view, i))
    noun = "image" if len(images) == 1 else "images"
    head = f"*{len(images)} container {noun}* in {where}, newest release first"
    if rule is not None:
        head += f" — ⛔ marks those too old for {_needs(rule)}"
    lines = [
        f"• {_name(i.name)} — {_release_text(view, i)}{_flag(view, i, rule)}{_list_state(i)}"
        for i in images
    ]
    return [
        head,
        *bounded(lines),
        "Search them: `/sky images torch==2.1` (`==2.1` also finds 2.1.x), "
        "`/sky images transformers>=4.30`.",
    ]


def _search(view: ClusterView, query: PackageQuery, rule: GpuRule | None) -> list[str]:
    index = _index(view)
    matches = find_images(query, index)
    asked = f"{shown(query.text)}"
    if matches:
        noun = "image has" if len(matches) == 1 else "images have"
        head = f"*{len(matches)} {noun}* {asked}"
        if any(not m.exact for m in matches):
            head += f" (exact matches first, then {literal(str(query.widened))})"
        lines = [head, *bounded([_match_line(view, m, rule) for m in matches])]
        too_old = sum(1 for m in matches if _too_old(view, m.image, rule))
        if rule is not None and too_old:
            verb = "is" if too_old == 1 else "are"
            lines.append(f"⛔ {too_old} of them {verb} too old for {_needs(rule)}.")
    else:
        lines = [_no_match(query, index, asked)]
    return lines + _search_notes(view.snapshot.images)


def _match_line(view: ClusterView, match: PackageMatch, rule: GpuRule | None) -> str:
    version = literal(match.version, 60) if match.version else "(no version given)"
    return (
        f"• {_name(match.image.name)} — {literal(match.name, 60)} {version}"
        f" · {_release_text(view, match.image)}{_flag(view, match.image, rule)}"
    )


def _no_match(query: PackageQuery, index: PackageIndex, asked: str) -> str:
    versions = versions_of(query, index)
    if query.canonical in index:
        listed = describe_versions(versions) if versions else "none with a version"
        return (
            f"No image has {asked}. Versions of {literal(query.name)} in the images "
            f"(newest first): {literal(listed)}."
        )
    hint = did_you_mean(query.canonical, index)
    maybe = f" Did you mean {literal(hint)}?" if hint else ""
    return f"No image lists a package called {shown(query.name)}.{maybe}"


def _search_notes(images: Sequence[ContainerImage]) -> list[str]:
    """Why a search may have missed something: images it could not search, lines it skipped."""
    notes: list[str] = []
    unlisted = [i.name for i in images if i.packages_file is None]
    if unlisted:
        named = ", ".join(_name(n) for n in unlisted[:MAX_NAMED])
        more = f" and {len(unlisted) - MAX_NAMED} more" if len(unlisted) > MAX_NAMED else ""
        noun = "image has" if len(unlisted) == 1 else "images have"
        notes.append(
            f"{len(unlisted)} {noun} no .packages list and could not be searched: {named}{more}."
        )
    problems = [_list_problem(i) for i in images if i.packages_error or i.unreadable_lines]
    return notes + bounded([f"⚠️ {p}" for p in problems], MAX_NOTES)


# ---------------------------------------------------------------- pieces


def _index(view: ClusterView) -> PackageIndex:
    return view.memo(("images", "index"), lambda: build_index(view.snapshot.images))


def _release(view: ClusterView, image: ContainerImage) -> Release | None:
    releases = view.memo(
        ("images", "releases"),
        lambda: {i.name: image_release(i.name) for i in view.snapshot.images},
    )
    return releases.get(image.name)


def _newest_first(view: ClusterView, image: ContainerImage) -> tuple[bool, int, str]:
    release = _release(view, image)
    order = -(release.year * 100 + release.month) if release is not None else 0
    return (release is None, order, image.name)


def _release_text(view: ClusterView, image: ContainerImage) -> str:
    release = _release(view, image)
    return f"release {release}" if release is not None else "release unknown"


def _too_old(view: ClusterView, image: ContainerImage, rule: GpuRule | None) -> bool:
    # An image whose release cannot be told is not flagged: no guessing either way.
    release = _release(view, image)
    return rule is not None and release is not None and release < rule.min_release


def _flag(view: ClusterView, image: ContainerImage, rule: GpuRule | None) -> str:
    return (
        f" · ⛔ too old for {literal(rule.gpu_type)}"
        if rule and _too_old(view, image, rule)
        else ""
    )


def _needs(rule: GpuRule) -> str:
    return f"{literal(rule.gpu_type)} (it needs release {rule.min_release} or newer)"


def _list_state(image: ContainerImage) -> str:
    if image.packages_file is None:
        return " · no .packages list"
    if image.packages_error or image.unreadable_lines:
        return f" · ⚠️ {_list_problem(image)}"
    return f" · {len(image.packages)} packages"


def _list_problem(image: ContainerImage) -> str:
    listed = _name(image.packages_file or "")
    if image.packages_error:
        return f"{listed} could not be read: {one_line(image.packages_error)}"
    n = image.unreadable_lines
    return f"{n} unreadable line{'s' if n != 1 else ''} in {listed} (skipped)"


def _name(file_name: str) -> str:
    return literal(file_name, 100)


COMMAND = Command(
    "images",
    USAGE,
    "container images for srun --container-image, or those that have a package version",
    run,
    "QUERY is a pip requirement: `torch`, `torch==2.1` (also 2.1.x), `transformers>=4.30`. "
    "Versions compare as pip's do: NGC builds like `1.7.0a0+7036e91` are pre-releases, older "
    "than `1.7`, so `torch>=1.7` skips them and `torch==1.7` finds them. "
    "`--gpu a100` marks images too old for that GPU type (quote names with spaces: "
    '`--gpu "rtx 3090"`). Lists come from each image\'s `.packages` file.',
)
