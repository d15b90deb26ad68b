"""The house stays small-roomed: modules, functions and constructors have size limits.

Read from the source with ast (nothing is imported). A constructor's size is its `__init__`
parameters, or for a record type (dataclass, msgspec Struct, NamedTuple) its fields, since
those are what a caller must pass. What may stay over a limit is listed once, in EXCEPTIONS,
each with its reason; an entry that is no longer needed fails the test too, so the list stays
honest and shrinks.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parent.parent
PACKAGES = ("core", "store", "scheduler", "handlers", "bot")
# _version.py is written by the build.
NOT_CHECKED = frozenset({"bot/_version.py"})

MAX_MODULE_LINES = 400
# Modules with a line limit of their own (their functions and constructors have the usual
# ones). The runner must stay one standard-library file: sudo runs it as root from
# /usr/local/libexec, outside the package and its imports (deploy/install-runner.sh).
MODULE_LIMITS = {"bot/install_files/skybot_runner.py": 1500}
MAX_FUNCTION_LINES = 60
MAX_CONSTRUCTOR_PARAMETERS = 6

# Key: "module PATH", "function PATH:QUALNAME" or "constructor PATH:CLASS".
_SLURM = "mirrors a Slurm record field for field"
_TOML = "mirrors a table of skybot.toml: decoded by msgspec, keyword-only, never built by hand"
_WIRE = "a message between the poller and its worker process: pickled whole, built in one place"
_ROW = "mirrors a row of its table, as the store reads it back"
EXCEPTIONS: dict[str, str] = {
    # Record types that mirror a record of Slurm or of skybot's own files and tables.
    "constructor handlers/clicks.py:Click": (
        "mirrors the fields skybot reads from Slack's block_actions payload, built in one place"
    ),
    "constructor scheduler/watchers/__init__.py:Watchers": (
        "one set of watchers per cluster: the cluster and its view, and the writer, directory, "
        "sender and runner it shares with the others"
    ),
    "constructor store/submissions.py:SubmissionRequest": _ROW
    + " (the submissions row it becomes)",
    "constructor core/cluster_config.py:ClusterConfig": _TOML + " ([[clusters]])",
    "constructor scheduler/outbox_policy.py:SenderPacing": (
        "the outbox's pacing, read from [notifications] once by SenderPacing.from_config"
    ),
    "constructor core/records.py:Job": _SLURM + " (squeue/sacct job)",
    "constructor core/records.py:Node": _SLURM + " (sinfo/scontrol node)",
    "constructor core/records.py:HetComponent": _SLURM + " (a het job component's own record)",
    "constructor core/records.py:JobUsage": _SLURM + " (sacct's usage columns)",
    "constructor core/config_schema.py:Config": _TOML + " (the top level)",
    "constructor core/cluster_config.py:SlurmConfig": _TOML + " ([slurm])",
    "constructor core/config_schema.py:NotificationsConfig": _TOML + " ([notifications])",
    "constructor core/gpu_watch.py:Watch": _ROW + " (watches)",
    "constructor store/outbox.py:QueuedMessage": _ROW + " (outbox)",
    "constructor store/submissions.py:Submission": _ROW + " (submissions)",
    # Not mirrors, each with a way to bring it under the limit (issue 30).
    "constructor store/watches.py:NewWatch": "not a mirror: split into who asks (team, user, "
    "cluster user: shared with Submission and CommandRequest) and what (GPUs, placement)",
    "constructor core/digest.py:LabWeek": "not a mirror: the three per-lab figure maps could "
    "be one LabFigures record beside the lab and its week",
    "constructor core/lab_usage.py:LabUsage": "not a mirror: the by-user/by-type/overcap "
    "tallies could be one GpuTally record",
    "constructor core/snapshot.py:ClusterSnapshot": "not a mirror: one field per source; "
    "could group the storage poller's fields (directories, filesystems, previous_kib, "
    "images, image_dir) into a StorageSnapshot",
    "constructor handlers/request.py:CommandRequest": "not a mirror: who asks (team, user, "
    "cluster user) could be one record, and the `--chart` pair (chart, channel) another",
    "constructor handlers/router.py:Command": "not a mirror: a command's texts (name, usage, "
    "summary, details) could be one CommandHelp record",
    "constructor handlers/services.py:Services": "not a mirror: what actions get; the "
    "optional per-process parts (limiter, job actions, chart queue) could be one record",
    # Messages between the poller and its worker process.
    "constructor core/snapshot_rows.py:SlurmChanges": _WIRE
    + " (one poll's rows: jobs, nodes, lab usage, their removals, the generation)",
    "constructor scheduler/slurm/wire.py:DigestRequest": _WIRE
    + " (the documents of one poll and what the digest needs to read them)",
    "constructor scheduler/slurm/wire.py:PollDigest": _WIRE
    + " (the changed rows and what the poller reports)",
    # Not a mirror, and no smaller record would say more.
    "constructor bot/service.py:Runtime": "the process's wiring: one field per part that "
    "`skybot run` starts and stops (store writer, cluster wings, schedule, sender, Bolt app, "
    "metrics, heartbeat, Socket Mode link), built in one place (build_runtime)",
}


@dataclass(frozen=True)
class Offender:
    key: str
    size: int
    limit: int
    unit: str

    def __str__(self) -> str:
        return f"{self.key}: {self.size} {self.unit} (limit {self.limit})"


_RECORD_DECORATORS = frozenset({"dataclass"})
_RECORD_BASES = frozenset({"Struct", "NamedTuple"})


def _name_of(node: ast.expr) -> str:
    """`dataclass`, `dataclasses.dataclass(...)`, `msgspec.Struct` → the last dotted name."""
    if isinstance(node, ast.Call):
        return _name_of(node.func)
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _is_classvar(annotation: ast.expr) -> bool:
    target = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    return _name_of(target) == "ClassVar"


def _is_init_field(statement: ast.stmt) -> bool:
    """A field a caller passes: not a ClassVar, not `field(init=False)`, and not the type's
    own private state (`_memo: dict = field(default_factory=dict)`), which no caller sets."""
    if not isinstance(statement, ast.AnnAssign) or not isinstance(statement.target, ast.Name):
        return False
    if statement.target.id.startswith("_") or _is_classvar(statement.annotation):
        return False
    value = statement.value
    return not (
        isinstance(value, ast.Call)
        and any(
            k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
            for k in value.keywords
        )
    )


def _own_fields(cls: ast.ClassDef) -> int:
    return sum(1 for statement in cls.body if _is_init_field(statement))


def _record_fields(cls: ast.ClassDef, records: dict[str, int]) -> int | None:
    """Fields a record type's constructor takes (inherited from records in this module
    included), or None when `cls` is not a record type."""
    bases = [_name_of(base) for base in cls.bases]
    is_record = any(_name_of(d) in _RECORD_DECORATORS for d in cls.decorator_list) or any(
        base in _RECORD_BASES or base in records for base in bases
    )
    if not is_record:
        return None
    return _own_fields(cls) + sum(records.get(base, 0) for base in bases)


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    arguments = function.args
    count = len(arguments.posonlyargs) + len(arguments.args) + len(arguments.kwonlyargs)
    count += (arguments.vararg is not None) + (arguments.kwarg is not None)
    return count - 1  # self


def offenders_in(
    relative: str, source: str, records: dict[str, int] | None = None
) -> list[Offender]:
    """Everything in one module's source that is over a limit. `records`: the record types
    known so far by name (a base imported from another module counts), added to."""
    found = []
    lines = len(source.splitlines())
    module_limit = MODULE_LIMITS.get(relative, MAX_MODULE_LINES)
    if lines > module_limit:
        found.append(Offender(f"module {relative}", lines, module_limit, "lines"))
    records = {} if records is None else records

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    key = f"function {relative}:{name}"
                    found.append(Offender(key, length, MAX_FUNCTION_LINES, "lines"))
                if child.name == "__init__" and prefix:
                    count = _parameters(child)
                    if count > MAX_CONSTRUCTOR_PARAMETERS:
                        key = f"constructor {relative}:{prefix.rstrip('.')}"
                        limit = MAX_CONSTRUCTOR_PARAMETERS
                        found.append(Offender(key, count, limit, "parameters"))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}"
                fields = _record_fields(child, records)
                if fields is not None:
                    records[child.name] = fields
                    if fields > MAX_CONSTRUCTOR_PARAMETERS:
                        key = f"constructor {relative}:{name}"
                        limit = MAX_CONSTRUCTOR_PARAMETERS
                        found.append(Offender(key, fields, limit, "fields"))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def offenders(root: Path = ROOT) -> list[Offender]:
    modules = [
        (relative, path.read_text())
        for package in PACKAGES
        for path in sorted((root / package).rglob("*.py"))
        if (relative := path.relative_to(root).as_posix()) not in NOT_CHECKED
    ]
    # First every module's record types, so a Struct whose base (e.g. config_base.Section)
    # lives in another module is still seen as one.
    records: dict[str, int] = {}
    for relative, source in modules:
        offenders_in(relative, source, records)
    return [
        found for relative, source in modules for found in offenders_in(relative, source, records)
    ]


def judge(found: list[Offender], exceptions: dict[str, str]) -> list[str]:
    """What is wrong: each offender not excepted, each exception no longer needed or
    without a reason."""
    over = {o.key for o in found}
    unlisted = [f"over: {o}" for o in found if o.key not in exceptions]
    stale = [f"stale exception (no longer over): {k}" for k in exceptions if k not in over]
    bare = [f"exception without a reason: {k}" for k, why in exceptions.items() if not why]
    return unlisted + sorted(stale) + bare


def test_nothing_is_over_a_limit_unless_excepted_and_no_exception_is_stale() -> None:
    problems = judge(offenders(), EXCEPTIONS)
    assert not problems, (
        "split what is over a limit (or add it to EXCEPTIONS in tests/test_structure.py with "
        "its reason); remove exceptions no longer needed:\n  " + "\n  ".join(problems)
    )


def _keys(source: str) -> list[str]:
    return [str(o) for o in offenders_in("core/x.py", source)]


def _body(lines: int) -> str:
    return "".join(f"    x{i} = {i}\n" for i in range(lines))


def test_a_long_module_is_caught() -> None:
    assert _keys("x = 1\n" * 401) == ["module core/x.py: 401 lines (limit 400)"]
    assert _keys("x = 1\n" * 400) == []


def test_a_long_function_is_caught_by_its_qualified_name() -> None:
    source = f"class A:\n  def ok(self):\n{_body(59)}\n  async def run(self):\n{_body(60)}"
    assert _keys(source) == ["function core/x.py:A.run: 61 lines (limit 60)"]
    nested = f"def outer():\n  def inner():\n{_body(60)}"
    assert "function core/x.py:outer.inner: 61 lines (limit 60)" in _keys(nested)


def test_a_wide_init_is_caught_and_self_is_not_counted() -> None:
    wide = "class A:\n  def __init__(self, a, b, c, d, e, f, *, g): pass\n"
    assert _keys(wide) == ["constructor core/x.py:A: 7 parameters (limit 6)"]
    assert _keys("class A:\n  def __init__(self, a, b, c, d, e, f): pass\n") == []


def test_record_types_count_their_fields_inherited_ones_too() -> None:
    fields = "".join(f"  f{i}: int\n" for i in range(4))
    source = (
        f"@dataclasses.dataclass(frozen=True)\nclass D:\n{fields}  g: int = 0\n"
        f"  h: ClassVar[int] = 0\n  _memo: dict = {{}}\n  i: int = field(init=False)\n"
        f"class S(msgspec.Struct, frozen=True):\n{fields}\n"
        f"class T(S):\n{fields}\n"
        f"class N(NamedTuple):\n{fields}  a: int\n  b: int\n  c: int\n"
        f"class P(Protocol):\n{fields}{fields}"
    )
    assert _keys(source) == [
        "constructor core/x.py:T: 8 fields (limit 6)",
        "constructor core/x.py:N: 7 fields (limit 6)",
    ]


def test_a_record_whose_base_is_in_another_module_is_still_a_record(tmp_path: Path) -> None:
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "base.py").write_text("class Section(msgspec.Struct):\n  pass\n")
    fields = "".join(f"  f{i}: int\n" for i in range(7))
    (tmp_path / "core" / "tables.py").write_text(f"class Wide(Section):\n{fields}")
    assert [o.key for o in offenders(tmp_path)] == ["constructor core/tables.py:Wide"]


def test_an_exception_no_longer_needed_or_missing_fails() -> None:
    found = [Offender("module core/x.py", 401, 400, "lines")]
    assert judge(found, {"module core/x.py": "why"}) == []
    assert judge(found, {}) == ["over: module core/x.py: 401 lines (limit 400)"]
    assert judge([], {"module core/x.py": "why"}) == [
        "stale exception (no longer over): module core/x.py"
    ]
    assert judge(found, {"module core/x.py": ""}) == [
        "exception without a reason: module core/x.py"
    ]


def test_generated_files_are_not_checked(tmp_path: Path) -> None:
    for relative in (*NOT_CHECKED, "core/big.py"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("x = 1\n" * 401)
    assert [o.key for o in offenders(tmp_path)] == ["module core/big.py"]


def test_the_runner_has_a_module_limit_of_its_own_and_the_usual_function_limit(
    tmp_path: Path,
) -> None:
    (runner,) = MODULE_LIMITS
    limit = MODULE_LIMITS[runner]
    (tmp_path / runner).parent.mkdir(parents=True)
    (tmp_path / runner).write_text("x = 1\n" * limit)
    assert offenders(tmp_path) == []
    long_function = f"def main():\n{_body(60)}"
    (tmp_path / runner).write_text("x = 1\n" * limit + long_function)
    assert [str(o) for o in offenders(tmp_path)] == [
        f"module {runner}: {limit + 61} lines (limit {limit})",
        f"function {runner}:main: 61 lines (limit 60)",
    ]


def test_the_installed_runner_is_checked() -> None:
    (runner,) = MODULE_LIMITS
    assert (ROOT / runner).exists()
    assert runner not in NOT_CHECKED


def test_every_exception_gives_a_reason_that_lasts() -> None:
    # What the code is, not who is changing it this week: that is for commit messages.
    process = re.compile(
        r"\bwt-|worktree|being split|this round|next round|at merge|right now|for now|"
        r"temporar|\btodo\b|\bwip\b|in progress|in parallel|another helper",
        re.I,
    )
    notes = [f"{key}: {why}" for key, why in EXCEPTIONS.items() if process.search(why)]
    assert not notes, "\n".join(notes)
