"""Package lists of container images, and finding the images that hold a wanted package.

Each image's `.packages` file is a pip-freeze style list, one `name==version` per line (the
container guide tells users to grep them). Queries are PEP 440 requirements (`torch`,
`torch==2.1`, `transformers>=4.30`) compared with the `packaging` library, never as strings:

- Names are compared canonicalised (PEP 503): `Torch`, `torch_vision` and `torch-vision`.
- Pre-releases always count. NGC images ship builds like `torch==1.7.0a0+7036e91`, which pip
  would otherwise skip, and which are exactly what users look for. They still order as PEP 440
  says: 1.7.0a0 is older than 1.7, so `torch>=1.7` does not find it (`torch==1.7` does).
- `name==X` (no wildcard, no local part) also matches X's patch releases, as `grep torch==2.1`
  does and as users expect: the images with exactly X (2.1, 2.1.0) come first, then those
  with `==X.*` (2.1.2, 2.1.0a0+…). Any other specifier means what PEP 440 says.
- Best match first: exact matches before patch-release ones, then the highest version, then
  the image name.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from core.records import ContainerImage

__all__ = [
    "MAX_QUERY",
    "PackageIndex",
    "PackageList",
    "PackageMatch",
    "PackageQuery",
    "QueryError",
    "build_index",
    "describe_versions",
    "find_images",
    "parse_packages",
    "parse_query",
    "versions_of",
]

# PEP 508 project names; anything else on a line is junk.
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_PINNED = re.compile(rf"(?P<name>{_NAME})\s*===?\s*(?P<version>[^\s;#]+)")
# `pip freeze` writes packages installed from a file or VCS as `name @ URL`, with no version.
_DIRECT = re.compile(rf"(?P<name>{_NAME})\s+@\s+\S+")
_QUERY = re.compile(rf"\s*(?P<name>{_NAME})\s*(?P<spec>.*)", re.DOTALL)
# A name longer than this is not a package anyone installed.
_MAX_NAME = 200
_MAX_VERSION = 100
# Longer lines are junk before any pattern sees them, and so are longer queries.
_MAX_LINE = 1000
MAX_QUERY = 200


class QueryError(ValueError):
    """A package query that is not `NAME[SPECIFIERS]`; the message says why, for users."""


@dataclass(frozen=True, slots=True)
class PackageList:
    packages: tuple[tuple[str, str], ...]
    unreadable_lines: int


def parse_packages(data: bytes) -> PackageList:
    """The (name, version) pairs of a .packages file and how many lines were junk.

    Blank lines and `#` comments are not junk; lines that are not valid UTF-8 are, without
    spoiling the rest of the list.
    """
    packages: list[tuple[str, str]] = []
    junk = 0
    for raw in data.splitlines():
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            junk += 1
            continue
        if not line or line.startswith("#"):
            continue
        if len(line) > _MAX_LINE:
            junk += 1
            continue
        pinned = _PINNED.fullmatch(line)
        direct = None if pinned else _DIRECT.fullmatch(line)
        if pinned and len(pinned["name"]) <= _MAX_NAME and len(pinned["version"]) <= _MAX_VERSION:
            packages.append((pinned["name"], pinned["version"]))
        elif direct and len(direct["name"]) <= _MAX_NAME:
            packages.append((direct["name"], ""))
        else:
            junk += 1
    return PackageList(tuple(packages), junk)


@dataclass(frozen=True, slots=True)
class PackageQuery:
    text: str
    name: str
    canonical: str
    specifier: SpecifierSet
    # `==X` widened to `==X.*`, when the query has such a pin; None otherwise.
    widened: SpecifierSet | None

    @property
    def any_version(self) -> bool:
        return not self.specifier


def parse_query(text: str) -> PackageQuery:
    """`torch`, `torch==2.1`, `transformers>=4.30,<5` as a query; QueryError if it is not one."""
    if len(text) > MAX_QUERY:
        raise QueryError(f"a package query is at most {MAX_QUERY} characters")
    match = _QUERY.fullmatch(text)
    if not match or len(match["name"]) > _MAX_NAME:
        raise QueryError("a package query starts with a package name, e.g. `torch==2.1`")
    spec_text = match["spec"].strip()
    try:
        specifier = SpecifierSet(spec_text)
    except InvalidSpecifier:
        raise QueryError(
            "after the package name comes a version condition like `==2.1` or `>=4.30`; "
            "one package per query"
        ) from None
    return PackageQuery(
        text=text.strip(),
        name=match["name"],
        canonical=canonicalize_name(match["name"]),
        specifier=specifier,
        widened=_widen(specifier),
    )


def _widen(specifier: SpecifierSet) -> SpecifierSet | None:
    """`==2.1` -> `==2.1.*` (other specifiers kept); None if nothing was widened."""
    parts: list[str] = []
    widened = False
    for spec in specifier:
        if spec.operator == "==" and not spec.version.endswith(".*") and "+" not in spec.version:
            parts.append(str(Specifier(f"=={spec.version}.*")))
            widened = True
        else:
            parts.append(str(spec))
    return SpecifierSet(",".join(parts)) if widened else None


@dataclass(frozen=True, slots=True)
class PackageMatch:
    image: ContainerImage
    # The package as the image's list names it.
    name: str
    version: str
    # False: matched only through `==X` widened to `==X.*`.
    exact: bool


# Canonical package name -> (image, name as written, version) for every image listing it.
PackageIndex = dict[str, list[tuple[ContainerImage, str, str]]]


def build_index(images: Iterable[ContainerImage]) -> PackageIndex:
    """Built once per snapshot: canonicalising every package of every image per query would
    cost more than the whole rest of a command."""
    index: PackageIndex = defaultdict(list)
    for image in images:
        for name, version in image.packages:
            index[canonicalize_name(name)].append((image, name, version))
    return dict(index)


def find_images(query: PackageQuery, index: PackageIndex) -> list[PackageMatch]:
    """The images whose lists satisfy `query`, best match first (see the module docstring)."""
    matches: list[PackageMatch] = []
    for image, name, version in index.get(query.canonical, ()):
        exact = _satisfies(query.specifier, version)
        if exact or (query.widened is not None and _satisfies(query.widened, version)):
            matches.append(PackageMatch(image, name, version, exact))
    return sorted(matches, key=_rank)


def versions_of(query: PackageQuery, index: PackageIndex) -> list[str]:
    """Every distinct version of the query's package in any image, highest first."""
    versions = {version for _, _, version in index.get(query.canonical, ()) if version}
    return sorted(versions, key=_version_key)


def _satisfies(specifier: SpecifierSet, version: str) -> bool:
    if not specifier:
        return True  # a bare name matches any version, even an unknown one
    parsed = _parse_version(version)
    return parsed is not None and specifier.contains(parsed, prereleases=True)


def _parse_version(version: str) -> Version | None:
    try:
        return Version(version)
    except InvalidVersion:
        return None


def _version_key(version: str) -> tuple[int, _Descending | str]:
    # Highest PEP 440 version first; versions pip cannot parse last, by text. The second item
    # is only ever compared with one of its own kind, since the first decides otherwise.
    parsed = _parse_version(version)
    return (0, _Descending(parsed)) if parsed is not None else (1, version)


def _rank(match: PackageMatch) -> tuple[bool, tuple[int, _Descending | str], str]:
    return (not match.exact, _version_key(match.version), match.image.name)


class _Descending:
    """Inverts a Version's order, so one ascending sort puts the highest version first."""

    __slots__ = ("version",)

    def __init__(self, version: Version) -> None:
        self.version = version

    def __lt__(self, other: _Descending) -> bool:
        return self.version > other.version

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and self.version == other.version

    def __hash__(self) -> int:
        return hash(self.version)


def describe_versions(versions: Sequence[str], limit: int = 8) -> str:
    """'2.2.0, 2.1.0, 1.7.1 and 3 more'."""
    shown = ", ".join(versions[:limit])
    rest = len(versions) - limit
    return f"{shown} and {rest} more" if rest > 0 else shown
