#!/usr/bin/python3 -IS
"""skybot-runner: the one program through which skybot acts as a cluster user.

skybot never becomes a user itself. Like JupyterHub's sudospawner and Open OnDemand's
nginx_stage, it runs this fixed mediator through sudo, as the target user, with no arguments:

    sudo -n -u alice -- /usr/local/libexec/skybot-runner   < request.json   > reply.json

The request is one JSON object on stdin; the reply is one JSON object on stdout, always either
{"ok": true, ...} or {"ok": false, "error": "<a sentence a person can act on>"}. A refusal
exits 0; only an internal failure (a bug, a broken installation) exits non-zero, and even then
stdout carries a JSON error and never a traceback.

Because the runner already runs AS THE USER, it cannot give anyone more power than the user
has: every check below protects the user against a confused (or compromised) bot, e.g. one
that would submit a script someone else planted, or pass `--uid`/`--wrap` through to sbatch.

Installation (`skybot install runner`, as root) copies this file from the installed skybot
package to /usr/local/libexec/skybot-runner, root:root 0755, rewrites the first line to the
chosen system interpreter and writes skybot's version into VERSION. Why the shebang is
`/usr/bin/python3 -IS` rather than `/usr/bin/env python3` or skybot's virtualenv:
  * the interpreter must be root-owned and outside anything the bot or a user can write: a
    pyenv/venv python under /root or /opt/skybot would let whoever can write there run code
    as every user in skybot-users;
  * `-I` (isolated mode) ignores PYTHON* environment variables, the user's site-packages and
    the current directory, so nothing the calling user or the bot controls lands on sys.path;
  * `-S` skips `site` entirely (no .pth files, no dist-packages): the runner needs only the
    standard library, so no third-party package is ever imported.
The kernel passes "-IS" as one argument, which Python accepts. The code avoids syntax newer
than Python 3.9 so distributions whose /usr/bin/python3 is 3.9 (RHEL/Rocky 9) can run it;
reading /etc/skybot/runner.toml needs tomllib (Python 3.11+).

Actions (each but "version" may carry "bot_version"; a runner installed by another skybot
version refuses it, before acting, so bot and runner never disagree about the protocol):
  version      {"action": "version"} -> {"ok": true, "version": VERSION}; answered for anyone
  submit       {"action": "submit", "script": PATH, "options": {...}, "roots": [...],
                "partitions": [...], "max_script_bytes": N, "tag": HEX (optional)}
               -> {"ok": true, "job_id": N, "cluster": NAME-or-null, "script": REALPATH}
               Submitting a tag once more returns the first answer, with no second sbatch
               (see "Exactly once" below).
               The job form's script comes as text instead ("script_text": TEXT, "workdir":
               DIR or ~/DIR; the reply's "script" is the directory): fed to sbatch's stdin,
               nothing is written to the home; the directory is checked as a script's is.
  submit-status {"action": "submit-status", "tag": HEX, "since": EPOCH}
               -> {"ok": true, "state": "running"}      a runner holds the submission now
                  {"ok": true, "state": "submitted", "job_id": N, ...}
                  {"ok": true, "state": "failed", "error": SBATCH'S ANSWER}
                  {"ok": true, "state": "absent"}       no runner holds it, and no job since
                                                         `since` carries its tag (squeue, sacct)
  cancel       {"action": "cancel", "job_id": "123" | "123_4"} -> {"ok": true, "job_id": ...}
  verify-link  {"action": "verify-link", "code": "ABC123"} -> {"ok": true, "user": NAME}
               Proof that only the user could have written the code: ~/.config/skybot/link and
               every directory from the home down to it owned by the user and writable by no
               one else, by mode bits or POSIX ACLs (access, and default on the directories).
               A refusal for that also carries "fix": the commands that would make it private.
  tail         {"action": "tail", "path": ABSPATH, "max_bytes": N, "max_lines": N,
                "end": OFFSET (optional: read what comes before this byte, for "show more")}
               -> {"ok": true, "data": BASE64, "start": OFFSET, "size": BYTES}
               The end of the user's OWN job output file: a regular file they own, opened
               without following a symbolic link, read with one pread from the end (a sparse
               1 GB file costs what its last chunk costs), bounded in bytes, lines and time.
  move-to-overcap {"action": "move-to-overcap", "job_id": "123", "partition": NAME,
                "account": NAME-or-null}
               -> {"ok": true, "job_id": "123", "partition": NAME, "account": NAME-or-null}
               The user's OWN PENDING job (a plain job id: no array, no heterogeneous job) goes
               to the overcap partition, and to its account when the site's overcap needs one,
               with `scontrol update` as the user. runner.toml's overcap_partition and
               overcap_account win over the request's.

Exactly once: a submission's tag names a record, ~/.local/state/skybot/submissions/TAG,
written only by the user's own runners. A submit holds an exclusive flock on it from before
sbatch until sbatch's answer is in it (fsync'd), and sbatch inherits the locked descriptor, so
the lock outlives a runner killed mid-sbatch for as long as sbatch itself runs. A bot that
restarts with a submission unaccounted for asks `submit-status`, which takes the same lock:
while anything may still submit the tag it answers "running", and only once nothing can does
it look for the tag in the record, squeue and sacct. The home directory, not /tmp or /run:
skybot.service has its own /tmp, and a record must outlive the service that started it.

/etc/skybot/runner.toml (optional, root-owned, not group/world-writable) overrides the
request's roots, partitions and limits, so a site can pin them regardless of what the bot sends:

    roots = ["/srv/hoffman-lab/flash9", "/srv/kira-lab/share4"]
    partitions = ["hoffman-lab", "kira-lab", "debug", "overcap"]
    max_script_bytes = 1048576
    group = "skybot-users"       # members are the only users the runner serves
    min_uid = 1000
    sbatch = "/usr/bin/sbatch"
    scancel = "/usr/bin/scancel"
    squeue = "/usr/bin/squeue"
    scontrol = "/usr/bin/scontrol"
    sacct = "/usr/bin/sacct"
    overcap_partition = "overcap"  # where move-to-overcap sends a job
    overcap_account = "overcap"    # and under which account ("" when overcap needs none)
    command_timeout_seconds = 30
    cluster = "skynet"           # reported when sbatch does not name the cluster

A bot that serves several clusters names each but its first in a request ("cluster": NAME;
the first is what the settings above describe); the runner acts there only if runner.toml has
a table for it, whose settings replace the ones above for that request. The bot sends a name,
never a path: what runs is what root wrote here.

    [clusters.nova]
    sbatch = "/opt/slurm-24.11/bin/sbatch"   # and scancel, squeue, scontrol, sacct likewise
    slurm_conf = "/etc/slurm-nova/slurm.conf"  # SLURM_CONF for that cluster's commands
    overcap_partition = "overcap"
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import grp
import hmac
import json
import os
import pwd
import re
import signal
import stat
import struct
import subprocess
import sys
import time
from typing import Any, NoReturn

# `skybot install runner` writes the installing skybot's version here.
VERSION = "uninstalled"
CONFIG_PATH = "/etc/skybot/runner.toml"
SLURM_CONF = "/etc/slurm/slurm.conf"
MAX_REQUEST_BYTES = 64 * 1024
# The deepest request the bot sends is 2 levels ({"options": {...}}); json.loads recurses per
# level, so depth is checked before parsing and a deep request is refused, not a crash.
MAX_REQUEST_DEPTH = 8
# The script cap when neither the request nor runner.toml gives one, and the most either may set.
DEFAULT_MAX_SCRIPT_BYTES = 1024 * 1024
HARD_MAX_SCRIPT_BYTES = 16 * 1024 * 1024
MAX_LINK_BYTES = 4096
MAX_PATH_CHARS = 4096
MAX_ERROR_CHARS = 2000
LINK_FILE = (".config", "skybot", "link")

DEFAULTS: dict[str, Any] = {
    "group": "skybot-users",
    "min_uid": 1000,
    "sbatch": "/usr/bin/sbatch",
    "scancel": "/usr/bin/scancel",
    "squeue": "/usr/bin/squeue",
    "scontrol": "/usr/bin/scontrol",
    "sacct": "/usr/bin/sacct",
    "command_timeout_seconds": 30.0,
    "cluster": None,
}
CONFIG_KEYS = {
    *DEFAULTS,
    "roots",
    "partitions",
    "max_script_bytes",
    "overcap_partition",
    "overcap_account",
    "clusters",
}
# What a [clusters.NAME] table may set: where that cluster's commands and slurm.conf are.
CLUSTER_KEYS = {
    "sbatch",
    "scancel",
    "squeue",
    "scontrol",
    "sacct",
    "slurm_conf",
    "cluster",
    "overcap_partition",
    "overcap_account",
    "command_timeout_seconds",
}
CLUSTER_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")

# Keys each action accepts; anything else is refused so a confused bot is noticed.
REQUEST_KEYS: dict[str, set[str]] = {
    "version": {"action"},
    "submit": {
        "action",
        "bot_version",
        "cluster",
        "script",
        "script_text",
        "workdir",
        "options",
        "roots",
        "partitions",
        "max_script_bytes",
        "tag",
    },
    "submit-status": {"action", "bot_version", "cluster", "tag", "since"},
    "cancel": {"action", "bot_version", "cluster", "job_id"},
    "verify-link": {"action", "bot_version", "cluster", "code"},
    "tail": {"action", "bot_version", "cluster", "path", "max_bytes", "max_lines", "end"},
    "move-to-overcap": {"action", "bot_version", "cluster", "job_id", "partition", "account"},
}

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
_DEP_ITEM = (
    r"(?:(?:after|afterany|afterok|afternotok|aftercorr|afterburstbuffer)"
    r"(?::[0-9]{1,10}(?:_[0-9]{1,7})?(?:\+[0-9]{1,6})?)+|singleton)"
)
_TIME = (
    r"(?:[0-9]{1,7}(?::[0-9]{1,2}){0,2}"  # minutes | minutes:seconds | hours:minutes:seconds
    r"|[0-9]{1,4}-[0-9]{1,2}(?::[0-9]{1,2}){0,2}"  # days-hours[:minutes[:seconds]]
    r"|UNLIMITED|INFINITE)"
)

# option name -> (strict full-match pattern, sbatch flag, what a valid value looks like)
OPTIONS: dict[str, tuple[re.Pattern[str], str, str]] = {
    "partition": (re.compile(_NAME), "--partition", "a partition name"),
    "gpus": (
        re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9_.-]{0,31}:)?[1-9][0-9]{0,2}"),
        "--gpus-per-node",
        'a GPU count like "2" or "a40:2"',
    ),
    "time": (re.compile(_TIME), "--time", 'a Slurm time like "90", "4:00:00" or "2-12:00:00"'),
    "qos": (re.compile(_NAME), "--qos", "a QOS name"),
    "account": (re.compile(_NAME), "--account", "an account name"),
    "job_name": (re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}"), "--job-name", "a job name"),
    "dependency": (
        re.compile(rf"{_DEP_ITEM}(?:[,?]{_DEP_ITEM}){{0,63}}"),
        "--dependency",
        'a dependency like "afterok:123" or "afterany:123:124"',
    ),
}

# The bot's submission id, put into the job's comment so that after a crash between sbatch and
# recording its answer, the bot can find the job instead of submitting it twice.
SUBMISSION_TAG = re.compile(r"[0-9a-f]{16,32}")
COMMENT_PREFIX = "skybot:"
JOB_ID = re.compile(r"[0-9]{1,10}(?:_[0-9]{1,7})?")
# A job that is neither an array nor a heterogeneous job, as move-to-overcap takes it.
PLAIN_JOB_ID = re.compile(r"[0-9]{1,10}")
SLURM_NAME = re.compile(_NAME)
LINK_CODE = re.compile(r"[A-Za-z0-9_-]{4,128}")
# Characters no option value may contain: shell metacharacters, quotes and whitespace.
FORBIDDEN_CHARS = set(";&|$`<>(){}[]*!'\"\\#~ \t")


class Refusal(Exception):
    """A request the runner will not carry out; the message goes to the user as is."""


class InternalError(Exception):
    """The runner or its installation is broken (exit status 1)."""


class VersionMismatch(Refusal):
    """The bot and this runner come from different skybot versions."""


# ----------------------------------------------------------------------------------------------
# Small helpers


def reply(payload: dict[str, Any], status: int = 0) -> NoReturn:
    sys.stdout.write(json.dumps(payload, sort_keys=True) + "\n")
    sys.stdout.flush()
    raise SystemExit(status)


def describe_char(ch: str) -> str:
    names = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", " ": "a space"}
    if ch in names:
        return names[ch]
    if ord(ch) < 32 or ord(ch) == 127 or 0x80 <= ord(ch) < 0xA0:
        return f"a control character (U+{ord(ch):04X})"
    return f"the character {ch!r}"


def first_control_char(value: str) -> str | None:
    for ch in value:
        if ord(ch) < 32 or ord(ch) == 127 or 0x80 <= ord(ch) < 0xA0 or ch in "\u2028\u2029":
            return ch
    return None


def clean_output(text: str) -> str:
    """A command's stderr/stdout, trimmed to something that fits in a chat message."""
    text = "".join(ch if ch in "\n\t" or ord(ch) >= 32 else "?" for ch in text).strip()
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 1] + "…"
    return text


def is_within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


# ----------------------------------------------------------------------------------------------
# Configuration and identity


def load_config() -> dict[str, Any]:
    """runner.toml, if present. It only counts when root owns it and nobody else can write it."""
    try:
        fd = os.open(CONFIG_PATH, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise InternalError(f"cannot read {CONFIG_PATH}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > 64 * 1024:
            raise InternalError(f"{CONFIG_PATH} is not a small regular file")
        if st.st_uid != 0 or st.st_mode & 0o022:
            raise InternalError(f"{CONFIG_PATH} must be owned by root and not group/world-writable")
        raw = os.read(fd, 64 * 1024 + 1)
    finally:
        os.close(fd)
    try:
        import tomllib  # Python 3.11+; imported only when the file exists
    except ImportError:
        raise InternalError(f"{CONFIG_PATH} exists but this Python has no tomllib") from None
    try:
        config = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InternalError(f"{CONFIG_PATH} is not valid TOML: {exc}") from None
    unknown = sorted(set(config) - CONFIG_KEYS)
    if unknown:
        raise InternalError(f"{CONFIG_PATH}: unknown key(s) {', '.join(unknown)}")
    checks = {
        "group": lambda v: isinstance(v, str) and bool(v),
        "min_uid": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
        "sbatch": lambda v: isinstance(v, str) and v.startswith("/"),
        "scancel": lambda v: isinstance(v, str) and v.startswith("/"),
        "squeue": lambda v: isinstance(v, str) and v.startswith("/"),
        "scontrol": lambda v: isinstance(v, str) and v.startswith("/"),
        "sacct": lambda v: isinstance(v, str) and v.startswith("/"),
        "overcap_partition": lambda v: isinstance(v, str) and SLURM_NAME.fullmatch(v),
        "overcap_account": lambda v: isinstance(v, str) and (v == "" or SLURM_NAME.fullmatch(v)),
        "command_timeout_seconds": lambda v: isinstance(v, (int, float)) and 0 < v <= 600,
        "cluster": lambda v: isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9._-]+", v),
    }
    checks["slurm_conf"] = lambda v: isinstance(v, str) and v.startswith("/")
    tables = [("", config)]
    clusters = config.get("clusters", {})
    if not isinstance(clusters, dict):
        raise InternalError(f"{CONFIG_PATH}: clusters must be tables ([clusters.NAME])")
    for name, table in clusters.items():
        if not CLUSTER_NAME.fullmatch(name) or not isinstance(table, dict):
            raise InternalError(f"{CONFIG_PATH}: [clusters.{name}] is not a cluster table")
        extra = sorted(set(table) - CLUSTER_KEYS)
        if extra:
            raise InternalError(f"{CONFIG_PATH}: [clusters.{name}]: unknown key(s) {extra}")
        tables.append((f"clusters.{name}.", table))
    for prefix, table in tables:
        for key, ok in checks.items():
            if key in table and not ok(table[key]):
                raise InternalError(f"{CONFIG_PATH}: {prefix}{key} = {table[key]!r} is not valid")
    return config


def for_cluster(config: dict[str, Any], name: Any) -> dict[str, Any]:
    """The settings for the cluster a request names: its runner.toml table over the rest.
    A name runner.toml does not list is refused: the runner never guesses a cluster's Slurm."""
    if name is None:
        return config
    tables = config.get("clusters", {})
    if not isinstance(name, str) or name not in tables:
        known = ", ".join(sorted(tables)) or "none"
        raise Refusal(
            f"skybot-runner does not know the cluster {str(name)[:40]!r} (runner.toml lists: "
            f"{known}); an admin must add [clusters.NAME] to {CONFIG_PATH}."
        )
    return {**config, "cluster": name, **tables[name]}


def setting(config: dict[str, Any], key: str) -> Any:
    return config.get(key, DEFAULTS[key])


def check_identity(config: dict[str, Any]) -> pwd.struct_passwd:
    """Whom we run as: never root or a system account, always a member of the skybot group."""
    uid = os.getuid()
    if os.geteuid() != uid:
        raise Refusal("skybot-runner must not be setuid; it runs as the user through sudo.")
    try:
        user = pwd.getpwuid(uid)
    except KeyError:
        raise Refusal(f"Your uid {uid} has no entry in the user database.") from None
    min_uid = setting(config, "min_uid")
    if uid == 0 or uid < min_uid or uid in (65534, 4294967294, 4294967295):
        raise Refusal(f"skybot does not act as {user.pw_name}: it is a system account.")
    shell = os.path.basename(user.pw_shell or "")
    if shell in ("", "nologin", "false"):
        raise Refusal(f"skybot does not act as {user.pw_name}: the account has no login shell.")
    group_name = setting(config, "group")
    try:
        group = grp.getgrnam(group_name)
    except KeyError:
        raise InternalError(f"the group {group_name} does not exist") from None
    if group.gr_gid not in os.getgrouplist(user.pw_name, user.pw_gid):
        raise Refusal(
            f"{user.pw_name} is not in the {group_name} group, so skybot may not act "
            "for this account."
        )
    return user


# ----------------------------------------------------------------------------------------------
# submit


def string_list(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise Refusal(f"'{what}' must be a list of names.")
    for v in value:
        if first_control_char(v) is not None:
            raise Refusal(f"'{what}' contains a control character.")
    return list(value)


def effective_limits(
    request: dict[str, Any], config: dict[str, Any]
) -> tuple[list[str], list[str], int]:
    """Roots, partitions and script cap: runner.toml wins over the request when it sets them."""
    roots = (
        string_list(config["roots"], "roots")
        if "roots" in config
        else string_list(request.get("roots"), "roots")
    )
    for root in roots:
        if not root.startswith("/"):
            raise Refusal(f"The storage root {root!r} is not an absolute path.")
    partitions = (
        string_list(config["partitions"], "partitions")
        if "partitions" in config
        else string_list(request.get("partitions"), "partitions")
    )
    caps = [DEFAULT_MAX_SCRIPT_BYTES] if "max_script_bytes" not in config else []
    for source, value in (
        ("runner.toml", config.get("max_script_bytes")),
        ("the request", request.get("max_script_bytes")),
    ):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise Refusal(f"max_script_bytes in {source} must be a positive integer.")
        caps.append(value)
    if "max_script_bytes" in config:
        # The site's cap is the ceiling; the bot may only ask for something smaller.
        caps = [c for c in caps if c <= config["max_script_bytes"]]
    return roots, partitions, min([*caps, HARD_MAX_SCRIPT_BYTES])


def check_path_text(raw: str, what: str) -> None:
    """Refuse a path that is too long or holds a control character, naming it as `what`."""
    if len(raw) > MAX_PATH_CHARS:
        raise Refusal(f"That {what} is too long.")
    bad = first_control_char(raw)
    if bad is not None:
        raise Refusal(f"The {what} contains {describe_char(bad)}.")


def candidate_paths(raw: object, user: pwd.struct_passwd, roots: list[str]) -> list[str]:
    """Where the script the user named could be: absolute, ~-relative, or relative to the home
    directory and then to the user's own directory under each storage root."""
    if not isinstance(raw, str) or not raw.strip():
        raise Refusal("Say which batch script to submit (a path to a file).")
    check_path_text(raw, "script path")
    if ".." in raw.split("/"):
        raise Refusal(f"The script path {raw!r} contains '..'; give the path without it.")
    home = user.pw_dir
    if raw == "~" or raw.startswith("~/"):
        return [home.rstrip("/") + raw[1:]]
    if raw.startswith("~"):
        raise Refusal(f"{raw!r}: only ~ (your own home directory) is understood.")
    if raw.startswith("/"):
        return [raw]
    bases = [home] + [os.path.join(root, user.pw_name) for root in roots]
    return [os.path.join(base, raw) for base in bases if base.startswith("/")]


def allowed_dirs(user: pwd.struct_passwd, roots: list[str]) -> list[str]:
    dirs = []
    if user.pw_dir.startswith("/") and os.path.realpath(user.pw_dir) != "/":
        dirs.append(os.path.realpath(user.pw_dir))
    dirs += [os.path.realpath(root) for root in roots if os.path.realpath(root) != "/"]
    return dirs


def open_script(
    raw: object, user: pwd.struct_passwd, roots: list[str], cap: int
) -> tuple[int, str, bytes]:
    """Open and read the script safely. Returns (directory fd, real path, content).

    The directory is resolved with realpath and must lie inside the user's home or a storage
    root; the file itself is opened relative to that directory with O_NOFOLLOW, and every
    check (regular file, owned by the user, size) is made on the opened descriptor.
    """
    path = script_path(raw, user, roots)
    directory, name = os.path.split(path)
    if not name:
        raise Refusal(f"{path} is a directory, not a batch script.")
    dir_fd, opened = open_submit_dir(path, directory, allowed_dirs(user, roots))
    try:
        fd = open_in_dir(dir_fd, name, path)
        try:
            content = read_own_script(fd, path, user, cap)
        finally:
            os.close(fd)
    except BaseException:
        os.close(dir_fd)
        raise
    return dir_fd, os.path.join(opened, name), content


def script_path(raw: object, user: pwd.struct_passwd, roots: list[str]) -> str:
    """The absolute path of the script the user named: the one candidate, or the first that
    exists."""
    candidates = candidate_paths(raw, user, roots)
    if not candidates:
        raise Refusal(f"The script path {raw!r} must be absolute.")
    if len(candidates) == 1:
        path = candidates[0]
    else:
        found = next((p for p in candidates if os.path.lexists(p)), None)
        if found is None:
            raise Refusal(f"I could not find {raw!r}; I looked for {', '.join(candidates)}.")
        path = found
    if not os.path.isabs(path):
        raise Refusal(f"The script path {raw!r} must be absolute.")
    return path


def open_submit_dir(path: str, directory: str, allowed: list[str]) -> tuple[int, str]:
    """(fd, where it really is) of the script's directory, which must lie inside `allowed`
    both before it is opened and, through the descriptor, after."""
    real_dir = os.path.realpath(directory)
    if not any(is_within(real_dir, a) for a in allowed):
        raise Refusal(
            f"{path} is outside the places skybot submits from "
            f"({', '.join(allowed) or 'none configured'})."
        )
    try:
        dir_fd = os.open(real_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise Refusal(f"Cannot open the directory {real_dir}: {exc.strerror}.") from None
    # Re-check where the descriptor really points, in case the directory moved meanwhile.
    try:
        opened = os.readlink(f"/proc/self/fd/{dir_fd}")
    except OSError:
        opened = real_dir
    if not any(is_within(opened, a) for a in allowed):
        os.close(dir_fd)
        raise Refusal(f"{path} is outside the places skybot submits from.")
    return dir_fd, opened


def open_in_dir(dir_fd: int, name: str, path: str) -> int:
    """The script opened relative to its directory, never through a symbolic link."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refusal(
                f"{path} is a symbolic link; give the path of the real file "
                "(and it must be your own)."
            ) from None
        if exc.errno == errno.ENOENT:
            raise Refusal(f"There is no file {path}.") from None
        if exc.errno == errno.EACCES:
            raise Refusal(f"You cannot read {path} (permission denied).") from None
        raise Refusal(f"Cannot open {path}: {exc.strerror}.") from None


def read_own_script(fd: int, path: str, user: pwd.struct_passwd, cap: int) -> bytes:
    """The content of the opened script, if it is a regular file the user owns of at most
    `cap` bytes (checked on the descriptor, and again while reading)."""
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise Refusal(f"{path} is a directory, not a batch script.")
        if not stat.S_ISREG(st.st_mode):
            raise Refusal(f"{path} is not a regular file.")
        if st.st_uid != os.getuid():
            try:
                owner = pwd.getpwuid(st.st_uid).pw_name
            except KeyError:
                owner = f"uid {st.st_uid}"
            raise Refusal(
                f"{path} belongs to {owner}, not to {user.pw_name}; skybot only "
                "submits scripts you own."
            )
        if st.st_size > cap:
            raise Refusal(
                f"{path} is {st.st_size} bytes; batch scripts over {cap} bytes are refused."
            )
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > cap:
                raise Refusal(f"{path} is larger than {cap} bytes.")
            chunks.append(chunk)
    except OSError as exc:
        raise Refusal(f"Cannot read {path}: {exc.strerror}.") from None


def option_value(name: str, value: Any) -> str:
    if name == "gpus" and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise Refusal(f"The option '{name}' must be a string.")
    if not value:
        raise Refusal(f"The option '{name}' is empty.")
    bad = first_control_char(value)
    if bad is None:
        bad = next((ch for ch in value if ch in FORBIDDEN_CHARS or ch.isspace()), None)
    if bad is not None:
        raise Refusal(f"The option '{name}' contains {describe_char(bad)}, which is not allowed.")
    return value


def sbatch_options(options: Any, partitions: list[str]) -> list[str]:
    if options is None:
        return []
    if not isinstance(options, dict):
        raise Refusal("'options' must be an object of option names and values.")
    args = []
    for name in sorted(options, key=str):
        if name not in OPTIONS:
            clean = isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,40}", name)
            shown = f"'{name}'" if clean else repr(name)[:60]
            raise Refusal(
                f"The option {shown} is not allowed; skybot passes only "
                f"{', '.join(sorted(OPTIONS))}."
            )
        if options[name] is None:
            continue
        value = option_value(name, options[name])
        pattern, flag, looks_like = OPTIONS[name]
        if not pattern.fullmatch(value):
            raise Refusal(
                f"The option '{name}' has the value {value!r}, which is not {looks_like}."
            )
        if name == "partition" and value not in partitions:
            allowed = ", ".join(partitions) if partitions else "none"
            raise Refusal(
                f"The option 'partition' names {value!r}, which is not a partition skybot "
                f"submits to (allowed: {allowed})."
            )
        args.append(f"{flag}={value}")
    return args


def script_names_itself(content: bytes) -> bool:
    """Whether the script's #SBATCH header sets a job name (sbatch stops reading directives at
    the first command line). Conservative: anything that looks like -J/--job… counts."""
    for line in content.decode("utf-8", "replace").splitlines()[1:]:
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            return False
        if stripped.startswith("#SBATCH") and re.search(r"\s(?:-J|--job)", stripped):
            return True
    return False


def default_job_name(real_path: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._+-]", "_", os.path.basename(real_path))[:128]
    return name if name and name[0].isalnum() else f"job{name}"[:128]


def clean_env(user: pwd.struct_passwd, config: dict[str, Any] | None = None) -> dict[str, str]:
    """The only environment sbatch sees. SBATCH_EXPORT=NONE keeps whatever environment the job
    would inherit out of it (Open OnDemand issue #1330): the job starts from the user's own
    login environment on the compute node, not from the bot's. SLURM_CONF only from
    runner.toml (a cluster's table), never from the request."""
    slurm_conf = (config or {}).get("slurm_conf")
    return ({"SLURM_CONF": slurm_conf} if slurm_conf else {}) | {
        "PATH": "/usr/bin:/bin",
        "HOME": user.pw_dir,
        "USER": user.pw_name,
        "LOGNAME": user.pw_name,
        "LANG": "C.UTF-8",
        "SBATCH_EXPORT": "NONE",
    }


def run(
    argv: list[str],
    user: pwd.struct_passwd,
    config: dict[str, Any],
    stdin: bytes = b"",
    keep_fds: tuple[int, ...] = (),
) -> subprocess.CompletedProcess[bytes]:
    timeout = setting(config, "command_timeout_seconds")
    program = os.path.basename(argv[0])
    try:
        return subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            env=clean_env(user, config),
            timeout=timeout,
            check=False,
            close_fds=True,
            pass_fds=keep_fds,
        )
    except FileNotFoundError:
        raise InternalError(f"{argv[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise Refusal(
            f"{program} did not answer within {timeout:g} s; the Slurm controller "
            "may be busy. Check with squeue before retrying."
        ) from None


def cluster_name(config: dict[str, Any]) -> str | None:
    if setting(config, "cluster"):
        return str(setting(config, "cluster"))
    try:
        with open(
            config.get("slurm_conf") or SLURM_CONF, encoding="utf-8", errors="replace"
        ) as conf:
            for line in conf:
                m = re.match(r"\s*ClusterName\s*=\s*([A-Za-z0-9._-]+)", line, re.IGNORECASE)
                if m:
                    return m.group(1).lower()
    except OSError:
        pass
    return None


def do_submit(
    request: dict[str, Any], user: pwd.struct_passwd, config: dict[str, Any]
) -> dict[str, Any]:
    roots, partitions, cap = effective_limits(request, config)
    # Options first: a bad option is refused without touching the filesystem.
    options = sbatch_options(request.get("options"), partitions)
    if "script_text" in request or "workdir" in request:
        dir_fd, real_path, content = form_script(request, user, roots, cap)
    else:
        dir_fd, real_path, content = open_script(request.get("script"), user, roots, cap)
    try:
        # The job's working directory is the script's directory, entered through the very
        # descriptor that was checked.
        os.fchdir(dir_fd)
    finally:
        os.close(dir_fd)
    tag = None if request.get("tag") is None else submission_tag(request.get("tag"))
    if tag is not None:
        options.append(f"--comment={COMMENT_PREFIX}{tag}")
    if not any(o.startswith("--job-name=") for o in options) and not script_names_itself(content):
        options.append(f"--job-name={default_job_name(real_path)}")
    # The script goes to sbatch on stdin: sbatch gets exactly the bytes that were checked, so
    # nobody can swap the file between the checks and the submission.
    argv = [setting(config, "sbatch"), "--parsable", *options]
    if tag is None:
        return sbatch_answer(run(argv, user, config, stdin=content), config, real_path)
    return submit_once(argv, content, tag, user, config, real_path)


def form_script(
    request: dict[str, Any], user: pwd.struct_passwd, roots: list[str], cap: int
) -> tuple[int, str, bytes]:
    """(directory fd, its real path, the script) for the job form's script: the text as sent
    (for sbatch's stdin, so nothing is written to the user's home), at most `cap` bytes, and
    its working directory opened as a script file's directory is."""
    if "script" in request:
        raise Refusal("Give either a script path or a script's text, not both.")
    text = request.get("script_text")
    content = text.encode("utf-8", "replace") if isinstance(text, str) else b""
    if not content.strip() or b"\0" in content:
        raise Refusal("The script's text is empty or holds a NUL character.")
    if len(content) > cap:
        raise Refusal(f"The script is {len(content)} bytes; scripts over {cap} bytes are refused.")
    raw = request.get("workdir")
    if not isinstance(raw, str) or not (raw == "~" or raw.startswith(("~/", "/"))):
        raise Refusal("The working directory must be an absolute path or start with ~/.")
    check_path_text(raw, "working directory")
    if ".." in raw.split("/"):
        raise Refusal(f"The working directory {raw!r} contains '..'; give it without.")
    path = user.pw_dir.rstrip("/") + raw[1:] if raw.startswith("~") else raw
    dir_fd, opened = open_submit_dir(path, path, allowed_dirs(user, roots))
    return dir_fd, opened, content


def sbatch_answer(
    result: subprocess.CompletedProcess[bytes], config: dict[str, Any], real_path: str
) -> dict[str, Any]:
    out = result.stdout.decode("utf-8", "replace").strip()
    err = clean_output(result.stderr.decode("utf-8", "replace"))
    if result.returncode != 0:
        return {"ok": False, "error": err or f"sbatch failed with exit status {result.returncode}."}
    m = re.fullmatch(r"([0-9]+)(?:;([A-Za-z0-9._-]+))?", out.splitlines()[-1] if out else "")
    if not m:
        raise InternalError(f"unexpected sbatch output {clean_output(out)!r}")
    payload: dict[str, Any] = {
        "ok": True,
        "job_id": int(m.group(1)),
        "cluster": m.group(2) or cluster_name(config),
        "script": real_path,
    }
    if err:
        payload["warning"] = err
    return payload


# ----------------------------------------------------------------------------------------------
# Exactly once: submission records (see the module docstring)

SUBMISSION_RECORDS = (".local", "state", "skybot", "submissions")
RECORD_DAYS = 30
MAX_RECORD_BYTES = 64 * 1024


class Uncertain(Refusal):
    """Whether the submission reached Slurm cannot be told now: the bot must ask again later
    (submit-status), never submit it anew on this answer."""


def submission_tag(raw: Any) -> str:
    if not isinstance(raw, str) or not SUBMISSION_TAG.fullmatch(raw):
        raise Refusal("The submission tag must be 16 to 32 lowercase hex digits.")
    return raw


def open_record(user: pwd.struct_passwd, tag: str, *, create: bool) -> int | None:
    """The submission's record, opened read-write (None: there is none and `create` is off)."""
    directory = os.path.join(user.pw_dir, *SUBMISSION_RECORDS)
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
    try:
        if create:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            prune_records(directory)
        fd = os.open(os.path.join(directory, tag), flags | (os.O_CREAT if create else 0), 0o600)
    except OSError as exc:
        if not create and exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        shown = "~/" + "/".join(SUBMISSION_RECORDS)
        raise Refusal(
            f"skybot keeps a record of each submission in {shown}, so that a restart never "
            f"submits it twice, and cannot use it: {exc.strerror}."
        ) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        os.close(fd)
        raise Refusal(f"The submission record {tag} is not a regular file of {user.pw_name}'s.")
    return fd


def prune_records(directory: str) -> None:
    """Forget records older than RECORD_DAYS (no runner holds a lock that long)."""
    old = time.time() - RECORD_DAYS * 86400
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if SUBMISSION_TAG.fullmatch(name) and stat.S_ISREG(st.st_mode) and st.st_mtime < old:
                os.unlink(path)


def lock_record(fd: int, wait_seconds: float) -> bool:
    """Take the record's exclusive lock, waiting up to `wait_seconds`; False if still held."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)


def last_entry(fd: int) -> dict[str, Any] | None:
    """The record's last complete entry: a runner killed while appending leaves the one
    before it, which says less, never more."""
    data = os.pread(fd, MAX_RECORD_BYTES, 0)
    for line in reversed(data.split(b"\n")):
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict):
                return entry
    return None


def append_entry(fd: int, entry: dict[str, Any]) -> None:
    os.lseek(fd, 0, os.SEEK_END)
    os.write(fd, json.dumps(entry, sort_keys=True).encode("utf-8") + b"\n")
    os.fsync(fd)


def submit_once(
    argv: list[str],
    content: bytes,
    tag: str,
    user: pwd.struct_passwd,
    config: dict[str, Any],
    real_path: str,
) -> dict[str, Any]:
    """sbatch for this tag unless a runner already did: the record is locked from before
    sbatch until its answer is written, and sbatch inherits the lock."""
    fd = open_record(user, tag, create=True)
    assert fd is not None
    try:
        if not lock_record(fd, setting(config, "command_timeout_seconds")):
            raise Uncertain("Another skybot-runner is still submitting this; skybot will ask.")
        earlier = last_entry(fd)
        if earlier is not None and isinstance(earlier.get("reply"), dict):
            return dict(earlier["reply"])
        if earlier is not None:
            # A runner died between starting sbatch and writing its answer.
            found = tagged_job(tag, user, config, float(earlier.get("started", 0)) - 300)
            if found is not None:
                answer = {"ok": True, "job_id": found, "cluster": cluster_name(config)}
                append_entry(fd, {"reply": {**answer, "script": real_path}})
                return {**answer, "script": real_path}
        append_entry(fd, {"started": time.time()})
        try:
            result = run(argv, user, config, stdin=content, keep_fds=(fd,))
        except Refusal as exc:  # sbatch was killed at the timeout: it may have submitted
            raise Uncertain(str(exc)) from None
        answer = sbatch_answer(result, config, real_path)
        append_entry(fd, {"reply": answer})
        return answer
    finally:
        os.close(fd)


def do_submit_status(
    request: dict[str, Any], user: pwd.struct_passwd, config: dict[str, Any]
) -> dict[str, Any]:
    """Where a submission stands, asked by a bot that lost track of it (a restart)."""
    tag = submission_tag(request.get("tag"))
    since = bounded_int(request, "since", 0, 2**40, 0)
    fd = open_record(user, tag, create=False)
    try:
        if fd is not None:
            if not lock_record(fd, 0):
                return {"ok": True, "state": "running"}
            entry = last_entry(fd)
            earlier = entry.get("reply") if entry is not None else None
            if isinstance(earlier, dict) and earlier.get("ok") is True:
                return {**earlier, "state": "submitted"}
            if isinstance(earlier, dict):
                return {"ok": True, "state": "failed", "error": str(earlier.get("error"))}
        # Held while Slurm is asked, so no runner can start this tag's sbatch meanwhile.
        found = tagged_job(tag, user, config, since - 300)
    finally:
        if fd is not None:
            os.close(fd)
    if found is None:
        return {"ok": True, "state": "absent"}
    return {"ok": True, "state": "submitted", "job_id": found, "cluster": cluster_name(config)}


def tagged_job(
    tag: str, user: pwd.struct_passwd, config: dict[str, Any], since: float
) -> int | None:
    """The user's job whose comment carries `tag`: squeue, then sacct (for one that ended).
    Uncertain if either cannot answer."""
    comment = COMMENT_PREFIX + tag
    queue = [setting(config, "squeue"), "--noheader", "--all", "--states=all"]
    queue += [f"--user={user.pw_name}", "--format=%i|%k"]
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(max(since, 0)))
    accounting = [setting(config, "sacct"), "--noheader", "--parsable2", "--allocations"]
    accounting += [f"--user={user.pw_name}", f"--starttime={start}", "--format=JobID,Comment"]
    for argv in (queue, accounting):
        try:
            result = run(argv, user, config)
        except Refusal as exc:
            raise Uncertain(str(exc)) from None
        if result.returncode != 0:
            said = clean_output(result.stderr.decode("utf-8", "replace"))
            name = os.path.basename(argv[0])
            raise Uncertain(f"{name} failed ({said or result.returncode}); skybot will ask again.")
        for line in result.stdout.decode("utf-8", "replace").splitlines():
            job, _, found = line.strip().partition("|")
            number = job.split("_", 1)[0].split("+", 1)[0]
            if found == comment and number.isdigit():
                return int(number)
    return None


# ----------------------------------------------------------------------------------------------
# cancel and verify-link


def do_cancel(
    request: dict[str, Any], user: pwd.struct_passwd, config: dict[str, Any]
) -> dict[str, Any]:
    job_id = request.get("job_id")
    if isinstance(job_id, int) and not isinstance(job_id, bool):
        job_id = str(job_id)
    if not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id):
        raise Refusal("job_id must be a job number like 123 (or 123_4 for an array task).")
    # Without --verbose, scancel says nothing and exits 0 for a job id that does not exist or
    # has already finished; with it, every failure is an "error:" line (and only "permission
    # denied" also sets the exit status).
    result = run([setting(config, "scancel"), "--verbose", job_id], user, config)
    output = (result.stderr + result.stdout).decode("utf-8", "replace")
    errors = [line for line in output.splitlines() if "error" in line.lower()]
    if result.returncode != 0 or errors:
        message = clean_output("\n".join(errors) or output)
        return {
            "ok": False,
            "error": message or f"scancel failed with exit status {result.returncode}.",
        }
    return {"ok": True, "job_id": job_id}


def open_below(dir_fd: int, name: str, *, directory: bool) -> int:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
    if directory:
        flags |= os.O_DIRECTORY
    return os.open(name, flags, dir_fd=dir_fd)


# POSIX ACLs as the kernel keeps them in extended attributes (linux/posix_acl_xattr.h): a
# little-endian u32 version, then one (u16 tag, u16 permissions, u32 id) per entry. With an
# access ACL the mode's group bits are the ACL mask, not the owning group's permissions, so
# mode bits alone take `user:bob:rw` on a file of alice's private group for private.
ACL_ACCESS = "system.posix_acl_access"
ACL_DEFAULT = "system.posix_acl_default"
ACL_VERSION = 2
ACL_USER, ACL_GROUP_OBJ, ACL_GROUP, ACL_OTHER = 0x02, 0x04, 0x08, 0x20
ACL_WRITE = 0x02
ACL_ENTRY = struct.Struct("<HHI")
SHELL_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")


def private_group(gid: int, user: pwd.struct_passwd) -> bool:
    """The user's own group and nobody else's.

    With umask 002 and user private groups (Debian's USERGROUPS_ENAB), `mkdir -p` makes
    group-writable directories whose group is the user's own; those are as private as 0755.
    """
    try:
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    return (
        gid == user.pw_gid and group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}
    )


def read_acl(fd: int, name: str, shown: str) -> list[tuple[int, int, int]]:
    """The entries of one ACL; none where there is no ACL or the filesystem has none."""
    try:
        raw = os.getxattr(fd, name)
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.EOPNOTSUPP):
            return []
        raise Refusal(f"Cannot read the ACL of {shown}: {exc.strerror}.") from None
    size = ACL_ENTRY.size
    if len(raw) < 4 or (len(raw) - 4) % size or struct.unpack_from("<I", raw)[0] != ACL_VERSION:
        raise Refusal(f"The ACL of {shown} is in a form skybot cannot read; ask the admins.")
    return [ACL_ENTRY.unpack_from(raw, offset) for offset in range(4, len(raw), size)]


def id_name(ident: int, lookup: Any) -> str:
    """A user or group name fit to paste into a shell command, else the number."""
    try:
        name = str(lookup(ident)[0])
    except KeyError:
        return str(ident)
    return name if SHELL_SAFE_NAME.fullmatch(name) else str(ident)


def acl_writers(
    entries: list[tuple[int, int, int]],
    st: os.stat_result,
    user: pwd.struct_passwd,
    shown: str,
    *,
    default: bool,
) -> list[tuple[str, str]]:
    """(who else may write, the command that stops it) for each writing entry of an ACL.

    A default ACL is what everything made in the directory inherits, so there its owning group
    and "other" entries count too. The mask is not counted: only the owner can change it, and
    any later `chmod g+w` of theirs would silently give the write back.
    """
    what = f"what is made in {shown} (default ACL)" if default else f"{shown} (ACL)"
    d = "d:" if default else ""
    found = []
    for tag, perm, ident in entries:
        if not perm & ACL_WRITE:
            continue
        if tag == ACL_USER and ident != user.pw_uid:
            name = id_name(ident, pwd.getpwuid)
            found.append((f"user {name} can write {what}", f"setfacl -x {d}u:{name} {shown}"))
        elif tag == ACL_GROUP and not private_group(ident, user):
            name = id_name(ident, grp.getgrgid)
            found.append((f"group {name} can write {what}", f"setfacl -x {d}g:{name} {shown}"))
        elif default and tag == ACL_GROUP_OBJ and not private_group(st.st_gid, user):
            name = id_name(st.st_gid, grp.getgrgid)
            found.append((f"group {name} can write {what}", f"setfacl -m d:g::rX {shown}"))
        elif default and tag == ACL_OTHER:
            found.append((f"everyone can write {what}", f"setfacl -m d:o::rX {shown}"))
    return found


def writers_besides(
    fd: int, st: os.stat_result, user: pwd.struct_passwd, shown: str
) -> list[tuple[str, str]]:
    """Everyone but the user (and root) who can write this file or directory, with the fix."""
    access = read_acl(fd, ACL_ACCESS, shown)
    found: list[tuple[str, str]] = []
    if st.st_mode & 0o002:
        found.append((f"everyone can write {shown}", f"chmod o-w {shown}"))
    # With an access ACL the owning group's permissions are its group entry, not the mode.
    group_perms = [perm for tag, perm, _ in access if tag == ACL_GROUP_OBJ]
    group_writes = bool(group_perms[0] & ACL_WRITE) if group_perms else bool(st.st_mode & 0o020)
    if group_writes and not private_group(st.st_gid, user):
        name = id_name(st.st_gid, grp.getgrgid)
        fix = f"setfacl -m g::rX {shown}" if group_perms else f"chmod g-w {shown}"
        found.append((f"group {name} can write {shown}", fix))
    found += acl_writers(access, st, user, shown, default=False)
    if stat.S_ISDIR(st.st_mode):
        default = read_acl(fd, ACL_DEFAULT, shown)
        found += acl_writers(default, st, user, shown, default=True)
    return found


def open_link_chain(user: pwd.struct_passwd, shown: str) -> list[int]:
    """Descriptors of the home, ~/.config, ~/.config/skybot and the link file, opened without
    following a symbolic link, so what is checked is what is read."""
    fds: list[int] = []
    try:
        fds.append(os.open(user.pw_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        for part in LINK_FILE[:-1]:
            fds.append(open_below(fds[-1], part, directory=True))
        fds.append(open_below(fds[-1], LINK_FILE[-1], directory=False))
    except OSError as exc:
        for fd in reversed(fds):
            os.close(fd)
        if exc.errno == errno.ENOENT:
            raise Refusal(f"There is no {shown}; write the code there first.") from None
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refusal(
                f"{shown} (or a directory on the way) is a symbolic link or not "
                "a directory; it must be your own plain file."
            ) from None
        raise Refusal(f"Cannot open {shown}: {exc.strerror}.") from None
    return fds


def link_chain_writers(fds: list[int], user: pwd.struct_passwd) -> list[tuple[str, str]]:
    """Everyone else who could have put a code into the link file: by owning it or a
    directory on the way (root aside, who can write anything anyway), or by being let write."""
    shown = ["~", *("~/" + "/".join(LINK_FILE[: n + 1]) for n in range(len(LINK_FILE)))]
    found: list[tuple[str, str]] = []
    for index, fd in enumerate(fds):
        what = shown[index]
        st = os.fstat(fd)
        is_file = index == len(fds) - 1
        if st.st_uid != os.getuid() and (is_file or st.st_uid != 0):
            owner = id_name(st.st_uid, pwd.getpwuid)
            if is_file:  # in the user's own directory, so theirs to remove
                found.append((f"{what} belongs to {owner}, not {user.pw_name}", f"rm {what}"))
            else:
                found.append((f"{what} belongs to {owner} (ask the cluster admins)", ""))
        found += writers_besides(fd, st, user, what)
    return found


def do_verify_link(
    request: dict[str, Any], user: pwd.struct_passwd, config: dict[str, Any]
) -> dict[str, Any]:
    code = request.get("code")
    if not isinstance(code, str) or not LINK_CODE.fullmatch(code):
        raise Refusal("The link code must be 4 to 128 letters, digits, '-' or '_'.")
    shown = "~/" + "/".join(LINK_FILE)
    fds = open_link_chain(user, shown)
    try:
        others = link_chain_writers(fds, user)
        if others:
            fixes = list(dict.fromkeys(fix for _, fix in others if fix))
            error = f"{shown} proves nothing while others could have written it: "
            error += "; ".join(who for who, _ in others) + "."
            if fixes:
                error += " To make it yours alone, run: " + " && ".join(fixes)
            return {"ok": False, "error": error, "fix": fixes}
        st = os.fstat(fds[-1])
        if not stat.S_ISREG(st.st_mode):
            raise Refusal(f"{shown} is not a regular file.")
        if st.st_size > MAX_LINK_BYTES:
            raise Refusal(f"{shown} is too large to hold a link code.")
        data = os.read(fds[-1], MAX_LINK_BYTES + 1)
    finally:
        for fd in reversed(fds):
            os.close(fd)
    stored = data.strip()
    if not stored or not hmac.compare_digest(stored, code.encode("ascii")):
        return {"ok": False, "error": f"The code in {shown} does not match."}
    return {"ok": True, "user": user.pw_name}


# ----------------------------------------------------------------------------------------------
# tail

# What one tail request may read at most, whatever the bot asks for.
MAX_TAIL_BYTES = 64 * 1024
MAX_TAIL_LINES = 1000
TAIL_SECONDS = 10


def bounded_int(request: dict[str, Any], key: str, low: int, high: int, default: int) -> int:
    value = request.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise Refusal(f"'{key}' must be a whole number from {low} to {high}.")
    return value


def output_file_path(raw: Any) -> str:
    if not isinstance(raw, str) or not raw.startswith("/"):
        raise Refusal("'path' must be the absolute path of the job's output file.")
    check_path_text(raw, "output path")
    return raw


def _out_of_time(signum: int, frame: Any) -> NoReturn:
    raise Refusal(f"Reading the file took longer than {TAIL_SECONDS} s (a slow filesystem?).")


def do_tail(
    request: dict[str, Any], user: pwd.struct_passwd, config: dict[str, Any]
) -> dict[str, Any]:
    path = output_file_path(request.get("path"))
    max_bytes = bounded_int(request, "max_bytes", 1, MAX_TAIL_BYTES, 8192)
    max_lines = bounded_int(request, "max_lines", 1, MAX_TAIL_LINES, 40)
    end = bounded_int(request, "end", 0, 2**63 - 1, 2**63 - 1)
    # A hung network filesystem must not hold the request for ever; sudo passes SIGALRM on.
    signal.signal(signal.SIGALRM, _out_of_time)
    signal.alarm(TAIL_SECONDS)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOFOLLOW: the file itself
        # may not be a symbolic link (to someone else's file, or to /dev/zero).
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        try:
            fd = os.open(path, flags)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise Refusal("The file does not exist (yet, or any more).") from None
            if exc.errno == errno.ELOOP:
                raise Refusal(
                    "The file is a symbolic link; skybot reads only the file itself."
                ) from None
            if exc.errno in (errno.EACCES, errno.EPERM):
                raise Refusal(f"{user.pw_name} may not read the file.") from None
            raise Refusal(f"Cannot open the file: {exc.strerror}.") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "not a regular file"
                raise Refusal(f"The file is {kind}; skybot reads only regular files.")
            if st.st_uid != os.getuid():
                raise Refusal(
                    f"The file is not owned by {user.pw_name}; skybot shows only your own files."
                )
            end = min(end, st.st_size)
            start = max(0, end - max_bytes)
            data = os.pread(fd, end - start, start) if end > start else b""
        finally:
            os.close(fd)
    finally:
        signal.alarm(0)
    # Only the last max_lines lines are sent, from the newline before the first of them (a
    # chunk that does not start at offset 0 begins with a fragment the bot drops).
    cut = len(data) - 1 if data.endswith(b"\n") else len(data)
    for _ in range(max_lines):
        cut = data.rfind(b"\n", 0, cut)
        if cut < 0:
            break
    if cut >= 0:
        start += cut
        data = data[cut:]
    return {
        "ok": True,
        "data": base64.b64encode(data).decode("ascii"),
        "start": start,
        "size": st.st_size,
    }


# ----------------------------------------------------------------------------------------------
# move-to-overcap


def overcap_target(request: dict[str, Any], config: dict[str, Any]) -> tuple[str, str | None]:
    """The partition and account (None: keep the job's) a job moves to; runner.toml wins."""
    partition = config.get("overcap_partition", request.get("partition"))
    if not isinstance(partition, str) or not SLURM_NAME.fullmatch(partition):
        raise Refusal("'partition' must name the overcap partition (letters, digits, . _ -).")
    account = config.get("overcap_account", request.get("account"))
    if account in (None, ""):
        return partition, None
    if not isinstance(account, str) or not SLURM_NAME.fullmatch(account):
        raise Refusal("'account' must name the overcap account (letters, digits, . _ -), or null.")
    return partition, account


def queued_job(job_id: str, user: pwd.struct_passwd, config: dict[str, Any]) -> list[str]:
    """squeue's [id, owner, state, partition] for the job, refusing what cannot be moved."""
    argv = [setting(config, "squeue"), "--noheader", f"--jobs={job_id}", "--format=%i|%u|%T|%P"]
    result = run(argv, user, config)
    output = (result.stderr + result.stdout).decode("utf-8", "replace")
    if result.returncode != 0:
        if "invalid job id" in output.lower():
            raise Refusal(f"Job {job_id} is not in the queue (it ended, or never existed).")
        failed = f"squeue failed with exit status {result.returncode}."
        raise Refusal(clean_output(output) or failed)
    rows = [line.split("|") for line in result.stdout.decode("utf-8", "replace").splitlines()]
    if not rows:
        raise Refusal(f"Job {job_id} is not in the queue (it ended, or never existed).")
    if len(rows) != 1 or len(rows[0]) != 4 or rows[0][0] != job_id:
        # squeue lists an array's tasks (123_[4-9], 123_2) or a heterogeneous job's components
        # (123+0) under their own ids.
        raise Refusal(
            f"Job {job_id} is a job array or a heterogeneous job; skybot moves single jobs only."
        )
    return rows[0]


def do_move_to_overcap(
    request: dict[str, Any], user: pwd.struct_passwd, config: dict[str, Any]
) -> dict[str, Any]:
    job_id = request.get("job_id")
    if isinstance(job_id, int) and not isinstance(job_id, bool):
        job_id = str(job_id)
    if not isinstance(job_id, str) or not PLAIN_JOB_ID.fullmatch(job_id):
        raise Refusal("job_id must be a plain job number like 123 (not an array task).")
    partition, account = overcap_target(request, config)
    # Slurm would refuse another user's job too ("Invalid user id"), but a job the user could
    # update that is no longer pending, or is already there, deserves a plainer answer.
    _, owner, state, current = queued_job(job_id, user, config)
    if owner != user.pw_name:
        raise Refusal(
            f"Job {job_id} belongs to {owner}, not to {user.pw_name}; skybot moves only "
            "your own jobs."
        )
    if state != "PENDING":
        raise Refusal(
            f"Job {job_id} is {state.lower()}, not pending: only a job that has not started "
            "can move to overcap."
        )
    if current == partition:
        raise Refusal(f"Job {job_id} is already in the {partition} partition.")
    argv = [setting(config, "scontrol"), "update", f"JobId={job_id}", f"Partition={partition}"]
    if account is not None:
        argv.append(f"Account={account}")
    result = run(argv, user, config)
    if result.returncode != 0:
        message = clean_output((result.stderr + result.stdout).decode("utf-8", "replace"))
        return {
            "ok": False,
            "error": message or f"scontrol update failed with exit status {result.returncode}.",
        }
    return {"ok": True, "job_id": job_id, "partition": partition, "account": account}


# ----------------------------------------------------------------------------------------------


ACTIONS = {
    "submit": do_submit,
    "submit-status": do_submit_status,
    "cancel": do_cancel,
    "verify-link": do_verify_link,
    "tail": do_tail,
    "move-to-overcap": do_move_to_overcap,
}


def nesting_depth(text: str, limit: int) -> int:
    """How deeply arrays and objects nest in JSON text (strings skipped), stopping past `limit`."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                break
        elif ch in "]}":
            depth -= 1
    return deepest


def _no_duplicate_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object from its pairs, refusing a field given twice (JSON would keep the last)."""
    fields: dict[str, Any] = {}
    for key, value in pairs:
        if key in fields:
            shown = key if re.fullmatch(r"[A-Za-z0-9_-]{1,40}", key) else repr(key)[:60]
            raise Refusal(f"The request gives '{shown}' more than once; give it once.")
        fields[key] = value
    return fields


def _no_constant(name: str) -> Any:
    raise Refusal(f"The request is not valid JSON ({name} is not a JSON number).")


def read_request() -> dict[str, Any]:
    raw = sys.stdin.buffer.read(MAX_REQUEST_BYTES + 1)
    if len(raw) > MAX_REQUEST_BYTES:
        raise Refusal(f"The request is too large (over {MAX_REQUEST_BYTES} bytes).")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Refusal("The request is not valid UTF-8.") from None
    if nesting_depth(text, MAX_REQUEST_DEPTH) > MAX_REQUEST_DEPTH:
        raise Refusal(f"The request nests deeper than {MAX_REQUEST_DEPTH} levels.")
    try:
        request = json.loads(
            text, object_pairs_hook=_no_duplicate_fields, parse_constant=_no_constant
        )
    except (ValueError, RecursionError):
        raise Refusal("The request is not valid JSON.") from None
    if not isinstance(request, dict):
        raise Refusal("The request must be a JSON object.")
    return request


def check_bot_version(request: dict[str, Any]) -> None:
    """A bot of another version may send requests this runner reads differently: refuse."""
    bot_version = request.get("bot_version")
    if bot_version is not None and bot_version != VERSION:
        raise VersionMismatch(
            f"skybot {bot_version} cannot use skybot-runner {VERSION}: an admin must run "
            "`skybot install runner` as root with the skybot that runs the bot."
        )


def handle() -> dict[str, Any]:
    request = read_request()
    action = request.get("action")
    if action == "version":  # nothing to protect: answered before the identity checks
        return {"ok": True, "version": VERSION}
    config = load_config()
    user = check_identity(config)
    if not isinstance(action, str) or action not in ACTIONS:
        known = ", ".join(sorted([*ACTIONS, "version"]))
        raise Refusal(f"Unknown action {action!r}; expected one of {known}.")
    unknown = sorted(set(request) - REQUEST_KEYS[action], key=str)
    if unknown:
        raise Refusal(f"The {action} request has unexpected field(s): {', '.join(unknown)}.")
    check_bot_version(request)
    return ACTIONS[action](request, user, for_cluster(config, request.get("cluster")))


def main() -> NoReturn:
    # Never start anywhere the caller chose: sudo keeps the bot's working directory.
    os.chdir("/")
    os.umask(0o022)
    if len(sys.argv) > 1:
        reply(
            {
                "ok": False,
                "error": "skybot-runner takes no arguments; send a JSON request on stdin.",
            },
            2,
        )
    try:
        reply(handle())
    except VersionMismatch as exc:
        reply({"ok": False, "error": str(exc), "runner_version": VERSION})
    except Uncertain as exc:
        reply({"ok": False, "error": str(exc), "outcome_unknown": True})
    except Refusal as exc:
        reply({"ok": False, "error": str(exc)})
    except InternalError as exc:
        reply({"ok": False, "error": f"skybot-runner is misconfigured: {exc}."}, 1)
    except Exception as exc:  # the last line of defence: JSON, never a traceback
        reply({"ok": False, "error": f"skybot-runner failed internally ({type(exc).__name__})."}, 1)


if __name__ == "__main__":
    main()
