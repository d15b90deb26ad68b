"""Where a job's output went, and how its last lines are shown (pure functions).

Slurm stores `--output`/`--error` as the user typed them (`/scratch/%u/%x-%j.out`; squeue's
`standard_output` on 22.05 is that pattern, or "" for the default) and fills the pattern in
when the job starts. `expand_output_pattern` does the same filling in, following sbatch(1)'s
"filename pattern" section:

- `%%` a percent sign; `%A` the array's master job id; `%a` the array task id (4294967294,
  Slurm's NO_VAL, for a job that is not an array task); `%j` and `%J` the job id; `%x` the
  job name; `%u` the user name;
- `%N` the short host name of the node the batch script runs on: through 25.05 slurmd
  writes its own host name there (`conf->hostname` in src/slurmd/common/fname.c), which is
  the node's NodeHostname, not its NodeName (with `NodeName=clippy NodeHostname=vm`, the
  file is `…-vm.out`); the poll puts that name in `Job.output_host`;
- `%n`, `%t` `0` and `%s` `batch`: the batch script is task 0 on node 0 of the batch step;
- a number between `%` and the letter zero-pads a number (`%4j` -> `0042`), as Slurm does
  for numeric fields;
- a backslash anywhere turns expansion off and is itself dropped (`\\%j` stays `%j`);
- a relative path is relative to the job's working directory;
- anything else stays as it is: a guess would name someone else's file.

The tail itself is read by skybot-runner as the job's owner (never as the bot); it arrives as
bytes, and `shown_lines` turns them into lines fit for a fenced block: any encoding, progress
bars redrawn with carriage returns, and a cut through the middle of a line are all handled.
It also says at which byte the first shown line begins, so "Show more of the log"
(core/log_more.py) asks for exactly the chunk before: walking back, every line is shown once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from core.notice_text import format_bytes
from core.records import Job, Node
from core.runner_replies import Refused, decode_tail
from core.slack_text import fenced_code, literal

NO_VAL_TASK = "4294967294"
_PATTERN = re.compile(r"%(\d{0,9})([%AajJxuNnst])")
_NUMERIC = frozenset("AajJnt")
# ANSI escape sequences (colours, cursor moves) that tqdm and friends write to stderr.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# Slack shows a few dozen lines well; a line longer than this is cut anyway.
BYTES_PER_LINE = 512


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
            "J": str(job.job_id),
            "x": job.name,
            "u": job.user,
            "N": output_host(job),
            "n": "0",
            "t": "0",
            "s": "batch",
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


def output_host(job: Job) -> str:
    """The name Slurm puts for `%N`: the batch host's host name when the poll knew it, else
    the job's first node (its NodeName: the same on most sites); "" when none is known."""
    if job.output_host:
        return job.output_host
    first = job.nodes.split(",")[0]
    # A node list is compressed ("gpu[01-04]"): the batch host is its first name.
    prefix, bracket, rest = first.partition("[")
    if bracket:
        start = rest.split("-")[0].split("]")[0]
        return f"{prefix}{start}{rest.partition(']')[2]}" if start.isdigit() else ""
    return first


def host_names(nodes: Iterable[Node]) -> dict[str, str]:
    """NodeHostname by NodeName, for the nodes whose two names differ (most sites: none)."""
    return {node.name: node.hostname for node in nodes if node.hostname not in ("", node.name)}


_HOST_PATTERN = re.compile(r"%\d*N")


def with_host_names(jobs: Iterable[Job], names: Mapping[str, str]) -> list[Job]:
    """`jobs` with `output_host` the host name slurmd fills %N with (`host_names`), for the
    jobs whose output paths use %N (a copy of every running job costs a poll of 100,000
    jobs most of a second)."""
    if not names:
        return list(jobs)
    resolved = []
    for job in jobs:
        name = None
        if (job.nodes or job.output_host) and _uses_host(job):
            name = names.get(output_host(job))
        resolved.append(job if name is None else replace(job, output_host=name))
    return resolved


def _uses_host(job: Job) -> bool:
    return ("%" in job.std_out and _HOST_PATTERN.search(job.std_out) is not None) or (
        "%" in job.std_err and _HOST_PATTERN.search(job.std_err) is not None
    )


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

    `start` is the byte offset where `data` begins, `size` the file's size ("show more"
    asks for the chunk ending where the first line shown begins: `shown_lines`).
    """

    path: str
    data: bytes = b""
    start: int = 0
    size: int = 0
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ShownLines:
    """The lines of a chunk that are shown, and where in the file the first of them begins.

    `begins_at` is where the chunk before this one ends ("show more" asks for the bytes before
    it); 0 means the file's beginning is shown: there is nothing earlier.
    """

    text: str
    begins_at: int


def shown_lines(
    data: bytes,
    start: int,
    *,
    max_lines: int,
    max_chars: int,
    measure: Callable[[str], int] = len,
) -> ShownLines:
    """The last `max_lines` lines of `data` (which begins at byte `start` of its file) that
    fit in `max_chars` as `measure` counts them, as plain text, and the offset of the first.

    Bytes that are not UTF-8 become U+FFFD; a line redrawn with carriage returns (a progress
    bar) shows only its last drawing; colour codes and NULs are dropped. Unless the chunk starts
    at the beginning of the file, its first line is a fragment and is dropped (unless it is all
    there is: the end of one enormous line), so the chunk before it ends with that line whole.
    Lines that do not fit are dropped whole from the top, so that chunk shows them; only a
    single line too long for a message is cut, keeping its end. The caller escapes the result
    (core.slack_text.fenced_code): nothing here makes it safe for Slack.
    """
    pieces = data.split(b"\n")
    offsets = []
    at = start
    for piece in pieces:
        offsets.append(at)
        at += len(piece) + 1
    # UTF-8 never uses the newline byte inside a character, nor an escape sequence a newline.
    lines = [_ANSI.sub("", p.decode("utf-8", "replace")).replace("\x00", "") for p in pieces]
    first = 1 if start > 0 and any(line.strip() for line in lines[1:]) else 0
    last = len(lines)
    while last > first and not lines[last - 1].strip():
        last -= 1
    first = max(first, last - max_lines)
    shown = [line.rstrip("\r").rsplit("\r", 1)[-1].rstrip() for line in lines[first:last]]
    while len(shown) > 1 and measure("\n".join(shown)) > max_chars:
        shown.pop(0)
        first += 1
    if not shown:
        return ShownLines("", start)
    text = "\n".join(shown)
    keep = max_chars - 1
    while measure(text) > max_chars and keep > 0:
        # One line too long for a message: its end, shorter until it fits once escaped.
        text = "…" + shown[0][len(shown[0]) - keep :]
        keep -= max(1, measure(text) - max_chars)
    return ShownLines(text, offsets[first])


def tail_text(data: bytes, *, from_start: bool, max_lines: int, max_chars: int) -> str:
    """The last `max_lines` lines of `data`, at most `max_chars` characters, as plain text
    (`shown_lines`, for a chunk that does or does not start at the file's beginning)."""
    return shown_lines(data, 0 if from_start else 1, max_lines=max_lines, max_chars=max_chars).text


def tail_bytes(max_lines: int) -> int:
    """How many bytes one read of `max_lines` lines asks for: enough for lines of a few
    hundred characters, never more than the runner's 64 KiB."""
    return min(64 * 1024, max(4096, max_lines * BYTES_PER_LINE))


def tail_from_reply(path: str, reply: Mapping[str, object]) -> OutputTail:
    """The runner's answer to `tail` for `path`, or its refusal as a one-line reason."""
    tail = decode_tail(reply)
    if isinstance(tail, Refused):
        return OutputTail(path, error=tail.reason)
    return OutputTail(path, tail.data, tail.start, tail.size)


# A section block holds 3000 characters; a tail's own text gets this much of it, escaped.
TAIL_BLOCK_CHARS = 2400


# Which output file a tail is of: the job's stderr or its stdout (one file for both: "out").
STDERR, STDOUT = "err", "out"
STREAM_LABELS = {STDERR: "stderr", STDOUT: "stdout"}


@dataclass(frozen=True, slots=True)
class TailPart:
    """One output file's paragraph of a message, and where the lines before it end.

    `begins_at` is None when there is nothing earlier to show: the file's beginning is shown,
    or nothing could be read.
    """

    stream: str
    label: str
    markdown: str
    begins_at: int | None


def tail_parts(tails: Sequence[OutputTail], max_lines: int) -> list[TailPart]:
    """One part per output file: its last lines in a ``` block, or one line saying why they
    cannot be shown. `tails` holds stderr first, then stdout if it is another file (one
    entry when both went to the same file)."""
    named = [(STDOUT, "Output")] if len(tails) == 1 else [(STDERR, "stderr"), (STDOUT, "stdout")]
    return [
        tail_part(stream, label, tail, max_lines)
        for (stream, label), tail in zip(named, tails[:2], strict=False)
    ]


def tail_sections(tails: Sequence[OutputTail], max_lines: int) -> list[str]:
    """The mrkdwn of `tail_parts`."""
    return [part.markdown for part in tail_parts(tails, max_lines)]


def tail_part(
    stream: str, label: str, tail: OutputTail, max_lines: int, *, earlier: bool = False
) -> TailPart:
    """A tail's paragraph; `earlier`: it is a chunk from before what a message showed."""
    where = literal(tail.path, 200)
    if tail.error is not None:
        return TailPart(
            stream, label, f"*{label}* {where}: not shown: {literal(tail.error, 200)}", None
        )
    lines = shown_lines(
        tail.data,
        tail.start,
        max_lines=max_lines,
        max_chars=TAIL_BLOCK_CHARS,
        measure=lambda text: len(fenced_code(text)),
    )
    more = lines.begins_at if lines.begins_at > 0 else None
    if not lines.text:
        if tail.size == 0:
            return TailPart(stream, label, f"*{label}* {where} is empty.", None)
        return TailPart(
            stream, label, f"*{label}* {where}: blank{' here' if earlier else ''}.", more
        )
    shown = len(lines.text.split("\n"))
    plural = "s" if shown != 1 else ""
    which = (
        f"the {shown} line{plural} before those above, from byte {lines.begins_at:,}"
        if earlier
        else f"last {shown} line{plural}"
    )
    return TailPart(
        stream,
        label,
        f"*{label}* {where}, {which} of {format_bytes(tail.size)}:\n"
        f"```\n{fenced_code(lines.text)}\n```",
        more,
    )


def stream_path(job: Job, stream: str) -> str:
    """The file of `stream` (STDERR or STDOUT) for `job`, as Slurm reported it, filled in."""
    return stderr_path(job) if stream == STDERR else stdout_path(job)
