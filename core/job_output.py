"""Where a job's output went, and how its last lines are shown (pure functions).

Slurm stores `--output`/`--error` as the user typed them (`/scratch/%u/%x-%j.out`; squeue's
`standard_output` on 22.05 is that pattern, or "" for the default) and fills the pattern in
when the job starts. `expand_output_pattern` does the same filling in, following sbatch(1)'s
"filename pattern" section:

- `%%` a percent sign; `%A` the array's master job id; `%a` the array task id (4294967294,
  Slurm's NO_VAL, for a job that is not an array task); `%j` the job id; `%x` the job name;
  `%u` the user name; `%N` the first node's short name;
- a number between `%` and the letter zero-pads a number (`%4j` -> `0042`), as Slurm does
  for numeric fields;
- a backslash anywhere turns expansion off and is itself dropped (`\\%j` stays `%j`);
- a relative path is relative to the job's working directory;
- anything else (`%s`, `%t`, `%n`: step, task and node ids of srun's per-task files) stays as it
  is: a batch job's file does not use them, and a guess would name someone else's file.

The tail itself is read by skybot-runner as the job's owner (never as the bot); it arrives as
bytes, and `tail_text` turns them into lines fit for a fenced block: any encoding, progress
bars redrawn with carriage returns, and a cut through the middle of a line are all handled.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from core.notice_text import format_bytes
from core.records import Job
from core.slack_text import fenced_code, literal

NO_VAL_TASK = "4294967294"
_PATTERN = re.compile(r"%(\d{0,9})([%AajxuN])")
_NUMERIC = frozenset("Aaj")
# ANSI escape sequences (colours, cursor moves) that tqdm and friends write to stderr.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def expand_output_pattern(pattern: str, job: Job) -> str:
    """`pattern` (an --output/--error value) filled in for `job`, as Slurm fills it in."""
    if "\\" in pattern:
        path = pattern.replace("\\", "")
    else:
        values = {
            "%": "%",
            "A": str(job.array_job_id if job.array_job_id is not None else job.job_id),
            "a": job.array_task if job.array_job_id is not None and job.array_task else NO_VAL_TASK,
            "j": str(job.job_id),
            "x": job.name,
            "u": job.user,
            "N": job.nodes.split(",")[0] if job.nodes else "",
        }

        def fill(match: re.Match[str]) -> str:
            width, letter = match.groups()
            if letter == "N" and not values["N"]:
                return match.group()  # no node known: leave Slurm's pattern visible
            value = values[letter]
            if width and letter in _NUMERIC and value.isdigit():
                return value.zfill(int(width))
            return value

        path = _PATTERN.sub(fill, pattern)
    if path and not path.startswith("/") and job.work_dir:
        path = f"{job.work_dir.rstrip('/')}/{path}"
    return path


def default_output_pattern(job: Job) -> str:
    """sbatch's default when no --output is given: slurm-%j.out (%A_%a for array tasks)."""
    return "slurm-%A_%a.out" if job.array_job_id is not None else "slurm-%j.out"


def stdout_path(job: Job) -> str:
    """Where the job's stdout went."""
    return expand_output_pattern(job.std_out or default_output_pattern(job), job)


def stderr_path(job: Job) -> str:
    """Where the job's stderr went: its --error file, else the stdout file (Slurm's default)."""
    return expand_output_pattern(job.std_err, job) if job.std_err else stdout_path(job)


@dataclass(frozen=True, slots=True)
class OutputTail:
    """The end of one output file as the runner read it, or why it could not be read.

    `start` is the byte offset where `data` begins (for "show more": the next chunk ends
    there), `size` the file's size.
    """

    path: str
    data: bytes = b""
    start: int = 0
    size: int = 0
    error: str | None = None


def tail_text(data: bytes, *, from_start: bool, max_lines: int, max_chars: int) -> str:
    """The last `max_lines` lines of `data`, at most `max_chars` characters, as plain text.

    Bytes that are not UTF-8 become U+FFFD; a line redrawn with carriage returns (a progress
    bar) shows only its last drawing; colour codes and NULs are dropped. Unless the chunk starts
    at the beginning of the file, its first line is a fragment and is dropped (unless it is all
    there is: the end of one enormous line). The caller escapes the
    result (core.slack_text.fenced_code): nothing here makes it safe for Slack.
    """
    # NULs are a sparse file's holes (or a binary's padding): nothing to show.
    text = _ANSI.sub("", data.decode("utf-8", "replace")).replace("\x00", "")
    lines = text.split("\n")
    if not from_start and any(line.strip() for line in lines[1:]):
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines.pop()
    shown = [line.rstrip("\r").rsplit("\r", 1)[-1].rstrip() for line in lines[-max_lines:]]
    result = "\n".join(shown)
    if len(result) > max_chars:
        result = "…" + result[len(result) - max_chars + 1 :]
    return result


# A section block holds 3000 characters; a tail's own text gets this much of it, escaped.
TAIL_BLOCK_CHARS = 2400


def tail_sections(tails: Sequence[OutputTail], max_lines: int) -> list[str]:
    """One mrkdwn paragraph per output file: its last lines in a ``` block, or one line
    saying why they cannot be shown. `tails` holds stderr first, then stdout if it is
    another file (one entry when both went to the same file)."""
    labels = ["Output"] if len(tails) == 1 else ["stderr", "stdout"]
    return [
        _tail_section(label, tail, max_lines)
        for label, tail in zip(labels, tails[:2], strict=False)
    ]


def _tail_section(label: str, tail: OutputTail, max_lines: int) -> str:
    where = literal(tail.path, 200)
    if tail.error is not None:
        return f"*{label}* {where}: not shown: {literal(tail.error, 200)}"
    text = tail_text(
        tail.data, from_start=tail.start == 0, max_lines=max_lines, max_chars=TAIL_BLOCK_CHARS
    )
    if not text:
        return f"*{label}* {where} is empty." if tail.size == 0 else f"*{label}* {where}: blank."
    escaped = fenced_code(text)
    if len(escaped) > TAIL_BLOCK_CHARS:
        # Entities made it longer: keep the end, from a whole line.
        escaped = escaped[-TAIL_BLOCK_CHARS:]
        escaped = escaped.split("\n", 1)[1] if "\n" in escaped else escaped
    shown = len(text.split("\n"))
    return (
        f"*{label}* {where}, last {shown} line{'s' if shown != 1 else ''} "
        f"of {format_bytes(tail.size)}:\n```\n{escaped}\n```"
    )
