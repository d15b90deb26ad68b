"""`/sky log JOBID [--err] [--lines N]`: the last lines of one of your own jobs' output.

Running or ended (skybot keeps ended jobs `database.history_days`), read by the runner as
the job's owner (`tail`), with the failure DMs' limits, escaping and "Show more" button
(handlers/buttons/show_more_log.py). Only ever a private answer: `--here` is refused, and a job of
someone else is refused before the runner is asked anything.
"""

from __future__ import annotations

import re

from core.job_facts import shown_label
from core.job_output import STDERR, STDOUT, stderr_path, stdout_path, stream_path, tail_part
from core.log_more import more_block
from core.slack_text import literal
from handlers.buttons.show_more_log import read_output
from handlers.commands.common import not_linked, own_recorded_job, shown
from handlers.reply import Reply, section
from handlers.router import Command, CommandRequest, UsageError
from handlers.services import Services

USAGE = "log JOBID [--err] [--lines N]"
# Most lines one answer shows; the config's log_tail_lines (15) is the default.
MAX_LINES = 200
_COUNT = re.compile(r"[0-9]{1,3}")
_PLAIN_JOB_ID = re.compile(r"[0-9]{1,10}")


def parse_log_args(args: tuple[str, ...], default_lines: int) -> tuple[int, str, int]:
    """(job id, stream, lines) from what was typed, or a UsageError."""
    job_word: str | None = None
    stream, lines = STDOUT, default_lines
    rest = list(args)
    while rest:
        word = rest.pop(0)
        name, has_value, value = word.partition("=")
        if word == "--err":
            stream = STDERR
        elif name == "--lines":
            if not has_value:
                value = rest.pop(0) if rest else ""
            if not _COUNT.fullmatch(value) or not 1 <= int(value) <= MAX_LINES:
                raise UsageError(f"`--lines` takes a number from 1 to {MAX_LINES}.")
            lines = int(value)
        elif word.startswith("-") or job_word is not None:
            raise UsageError(f"{shown(word)} is not something `/sky log` takes: `/sky {USAGE}`")
        else:
            job_word = word.lstrip("#")
    if job_word is None or not _PLAIN_JOB_ID.fullmatch(job_word):
        raise UsageError(f"Which job? Usage: `/sky {USAGE}` (a job number like 1234).")
    return int(job_word), stream, lines


async def log(request: CommandRequest, services: Services) -> Reply:
    if request.here:
        raise UsageError("`/sky log` answers only you: a job's output is never posted for all.")
    me = request.cluster_user
    if me is None:
        raise not_linked(USAGE)
    configured = services.config.notifications.log_tail_lines
    if configured <= 0:
        raise UsageError("Showing job output is turned off on this cluster.")
    job_id, stream, lines = parse_log_args(request.args, configured)
    job = await own_recorded_job(
        services, job_id, me, "skybot shows a job's output only to its owner, so nothing was read."
    )
    one_file = stderr_path(job) == stdout_path(job)
    label = "Output" if one_file else ("stderr" if stream == STDERR else "stdout")
    # From here on the runner is asked: answer normally, never UsageError (router.py).
    tail = await read_output(services, me, stream_path(job, stream), None, lines)
    part = tail_part(stream, label, tail, lines)
    state = literal(job.state.lower())
    head = f"Job {shown_label(job)} {literal(job.name)} ({state}), read as {literal(me)}:"
    if one_file and stream == STDERR:
        head += " its stderr goes to the same file as its stdout."
    text = f"{head}\n{part.markdown}"
    view = services.current_view()
    named = view.cluster_name if view is not None else ""
    return Reply(text, [section(text), *more_block(named, job.job_id, [part])])


COMMAND = Command(
    "log",
    USAGE,
    "the last lines of your job's output (running or ended), read as you, shown only to you",
    act=log,
    starts_runner=True,
    details=(
        "`--err`: stderr instead of stdout. `--lines N`: how many (1 to 200). A button shows "
        "the lines before. Only your own jobs; never posted in a channel."
    ),
)
