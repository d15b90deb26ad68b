"""What the bot and skybot-runner agree on: the requests, the replies, the sbatch options.

The runner (bot/install_files/skybot_runner.py) acts as a cluster user through sudo. It must
stay one standard-library file, so it keeps its own copy of these rules;
tests/test_runner_contract.py imports it and checks that the two copies agree. The bot's side
that starts it (sudo, a subprocess) is bot/runner_client.py; scheduler/ and handlers/ only see
the `RunnerCall` below, which bot/service.py wires to it.

A request is one JSON object: "action", the action's own fields, and "bot_version" (every
action but "version"; the bot's client adds it), and, where the bot serves several clusters,
"cluster": a NAME the runner looks up in its own root-owned runner.toml (`[clusters.NAME]`:
that cluster's Slurm commands and SLURM_CONF). The bot never sends a path to run.
A reply is always {"ok": true, ...} or {"ok": false, "error": SENTENCE}; an ok reply carries
what the runner's docstring lists per action (submit: "job_id", "cluster", "script", maybe
"warning"; submit-status: "state" and, when submitted, "job_id"; cancel: "job_id";
verify-link: "user"; version: "version"; move-to-overcap: "job_id", "partition", "account").
Replies are read only through core/runner_replies.py, which decodes each into its action's
type or `Refused`.
Which user the runner acts as is sudo's choice, not a field: core/user_names.py says which
names the bot asks for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol, TypeGuard

from core.cluster_config import CLUSTER_NAME as CLUSTER_NAME

RunnerRequest = dict[str, Any]
RunnerReply = dict[str, Any]


class RunnerCall(Protocol):
    """Runs one request through skybot-runner as `user`; always returns a reply, never raises."""

    async def __call__(self, user: str, request: RunnerRequest, /) -> RunnerReply: ...


# Every action but "version" may carry these besides its own; the bot's client adds them.
ENVELOPE_FIELDS = frozenset({"bot_version", "cluster"})
# A cluster's name as the runner takes it (core/cluster_config.py names them so).

# Each action's own fields (besides "action" and the envelope); the runner refuses others.
REQUEST_FIELDS: Mapping[str, frozenset[str]] = {
    "version": frozenset(),
    # A script file ("script"), or the job form's script itself ("script_text", sbatch reads
    # it on stdin) with the directory it is submitted from ("workdir") instead.
    "submit": frozenset(
        {
            "script",
            "script_text",
            "workdir",
            "options",
            "roots",
            "partitions",
            "max_script_bytes",
            "tag",
        }
    ),
    # Where a submission stands after the bot lost track of it: running, submitted, failed or
    # absent (no runner holds it and no job since `since`, an epoch second, carries its tag).
    "submit-status": frozenset({"tag", "since"}),
    "cancel": frozenset({"job_id"}),
    "verify-link": frozenset({"code"}),
    # The end of the user's own job output file (failure DMs): read from `end` backwards.
    "tail": frozenset({"path", "max_bytes", "max_lines", "end"}),
    # The user's own pending job to the overcap partition (and account), with scontrol update.
    "move-to-overcap": frozenset({"job_id", "partition", "account"}),
}

# The sbatch options a submission may carry, by the runner's names (`job_name` is --job-name).
SUBMIT_OPTIONS = frozenset(
    {"partition", "gpus", "time", "qos", "account", "job_name", "dependency"}
)
# Never part of an option value: shell metacharacters, quotes and (besides) any whitespace.
FORBIDDEN_OPTION_CHARS = frozenset(";&|$`<>(){}[]*!'\"\\#~ \t")

# A job (or array task) id as `cancel` takes it.
JOB_ID = re.compile(r"[0-9]{1,10}(?:_[0-9]{1,7})?")
# A job id as `move-to-overcap` takes it: one job, not an array task.
PLAIN_JOB_ID = re.compile(r"[0-9]{1,10}")
# The bot's id for a submission; the runner puts COMMENT_PREFIX + tag in the job's comment, so
# after a crash between sbatch and recording its answer the bot can find the job in Slurm.
SUBMISSION_TAG = re.compile(r"[0-9a-f]{16,32}")
COMMENT_PREFIX = "skybot:"


def submission_comment(tag: str) -> str:
    """The job comment Slurm shows for the submission tagged `tag`."""
    return f"{COMMENT_PREFIX}{tag}"


def forbidden_option_char(value: str) -> str | None:
    """The first character the runner would refuse in an option value, if any."""
    return next((ch for ch in value if ch in FORBIDDEN_OPTION_CHARS or ch.isspace()), None)


def submit_request(
    *,
    script: str,
    options: Mapping[str, str],
    roots: list[str],
    partitions: list[str],
    tag: str,
    script_text: str | None = None,
) -> RunnerRequest:
    """The script file at `script`; or, with `script_text`, that text submitted from the
    directory `script` (the job form's)."""
    request: RunnerRequest = {
        "action": "submit",
        "options": dict(options),
        "roots": roots,
        "partitions": partitions,
        "tag": tag,
    }
    if script_text is None:
        return request | {"script": script}
    return request | {"script_text": script_text, "workdir": script}


def submit_status_request(tag: str, since: float) -> RunnerRequest:
    return {"action": "submit-status", "tag": tag, "since": int(since)}


def cancel_request(job_id: str) -> RunnerRequest:
    return {"action": "cancel", "job_id": job_id}


def verify_link_request(code: str) -> RunnerRequest:
    return {"action": "verify-link", "code": code}


def tail_request(
    path: str, max_lines: int, max_bytes: int, end: int | None = None
) -> RunnerRequest:
    """The last lines of `path`, or (with `end`) the last lines before byte `end`."""
    request: RunnerRequest = {
        "action": "tail",
        "path": path,
        "max_lines": max_lines,
        "max_bytes": max_bytes,
    }
    if end is not None:
        request["end"] = end
    return request


def move_to_overcap_request(job_id: str, partition: str, account: str) -> RunnerRequest:
    """`account` "" when the site's overcap partition needs no account of its own."""
    return {
        "action": "move-to-overcap",
        "job_id": job_id,
        "partition": partition,
        "account": account or None,
    }


def is_reply(value: object) -> TypeGuard[dict[str, Any]]:
    """Whether a decoded answer has the shape every runner reply has."""
    return isinstance(value, dict) and isinstance(value.get("ok"), bool)
