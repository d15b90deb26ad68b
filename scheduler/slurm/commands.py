"""Running Slurm's client commands: argument lists, a timeout, and one clear error.

Never through a shell, so nothing from a job name or a config value is ever interpreted.
Output goes to a temporary file rather than a pipe: `squeue --json` for 10,000 jobs is tens
of megabytes, and a pipe read would hold it twice (the chunks, then the joined bytes).
The commands run at POLL_NICENESS, as the poll worker does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

from core.slurm_decode import SlurmDecodeError, decode_slurm_json
from core.slurm_failure import Part, failed

# How much nicer than the bot the poll's own work runs: the poll worker, and the Slurm
# client commands it digests the output of. A poll can wait; an answer cannot. On a small
# host, a Slurm client building a large document (24.x squeue spends seconds of CPU on
# 100,000 jobs) at the bot's own priority takes the CPU from the event loop's answers.
POLL_NICENESS = 10


class SlurmCommandError(Exception):
    """A Slurm command failed, timed out or printed something that is not its documented output."""

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message, stderr)
        # Everything the command wrote to stderr, for callers that tell errors apart.
        self.stderr = stderr

    def __str__(self) -> str:
        return str(self.args[0])


async def run_slurm(
    bin_dir: str, command: str, args: list[str], timeout: float, slurm_conf: str | None = None
) -> bytes:
    """Run `bin_dir/command args…` and return its standard output."""
    with tempfile.TemporaryFile(prefix="skybot-slurm-") as output:
        await run_slurm_into(output, bin_dir, command, args, timeout, slurm_conf)
        output.seek(0)
        return output.read()


async def run_slurm_into(
    output: BinaryIO,
    bin_dir: str,
    command: str,
    args: list[str],
    timeout: float,
    slurm_conf: str | None = None,
) -> None:
    """Run `bin_dir/command args…` with its standard output going to the file `output`
    (the poll worker reads squeue's output from there, never through the event loop).
    `slurm_conf` names the cluster's slurm.conf when it is not the bot's own SLURM_CONF."""
    program = str(Path(bin_dir) / command)
    try:
        process = await asyncio.create_subprocess_exec(
            program,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=output,
            stderr=asyncio.subprocess.PIPE,
            env=_slurm_environment(slurm_conf),
            # A group of its own, so a timeout ends whatever it started too: a wrapper's
            # hung child would otherwise hold stderr open, and the poll with it.
            start_new_session=True,
        )
    except OSError as error:
        raise SlurmCommandError(f"cannot start {program}: {error.strerror}") from None
    _renice(process.pid)
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        await _reap(process)
        raise SlurmCommandError(f"{command} timed out after {timeout:g} s") from None
    except asyncio.CancelledError:
        # Shutting down mid-poll: leave no orphaned Slurm client behind.
        await _reap(process)
        raise
    if process.returncode != 0:
        text = stderr.decode(errors="replace").strip()
        last = text.splitlines()[-1] if text else "no error output"
        raise SlurmCommandError(f"{command} exited with status {process.returncode}: {last}", text)


async def run_slurm_json(
    bin_dir: str, command: str, args: list[str], timeout: float, slurm_conf: str | None = None
) -> dict[str, Any]:
    return slurm_document(command, await run_slurm(bin_dir, command, args, timeout, slurm_conf))


def slurm_document(command: str, raw: bytes) -> dict[str, Any]:
    """`command`'s JSON output as a document, or SlurmCommandError if it is not JSON or
    reports an error."""
    try:
        document = decode_slurm_json(raw)
    except SlurmDecodeError as error:
        if command.startswith("slurmrestd"):
            # An answer streamed into a file unread (restd_jobs.py): slurmrestd's failure.
            detail = f"{command} is not Slurm's JSON ({error}); it begins {raw[:80]!r}"
            raise SlurmCommandError(failed(Part.RESTD_GARBLED, detail)) from None
        raise SlurmCommandError(f"{command} printed something that is not JSON: {error}") from None
    return without_reported_errors(command, document)


def without_reported_errors(command: str, document: dict[str, Any]) -> dict[str, Any]:
    """The document, or SlurmCommandError if it reports an error that is not "no results"."""
    raise_reported_errors(command, document.get("errors"))
    # Only "no results" can be left: not an error, so nothing downstream may report it (the
    # parsers pass Slurm's errors on as warnings; sacct says it on most quiet polls).
    document.pop("errors", None)
    return document


def raise_reported_errors(command: str, reported: Any) -> None:
    """SlurmCommandError for the first error in a document's "errors" that is not "no results"."""
    # With the controller down, `squeue --json` still exits 0: it prints an empty job list
    # and says what went wrong in "errors". Taking that as "no jobs" would wipe the snapshot.
    errors = [e for e in reported or [] if not _means_no_results(e)]
    if errors:
        first = errors[0] if isinstance(errors[0], dict) else {"description": str(errors[0])}
        what = first.get("description") or first.get("error") or "unspecified error"
        where = f" ({first['source']})" if first.get("source") else ""
        raise SlurmCommandError(f"{command} reported an error: {what}{where}")


# sacct's way of saying "no jobs matched" (ESLURM_REST_EMPTY_RESULT): an answer, not an error.
_EMPTY_RESULT = 9003


def _means_no_results(error: Any) -> bool:
    return isinstance(error, dict) and error.get("error_number") == _EMPTY_RESULT


def _renice(pid: int) -> None:
    """The started command, POLL_NICENESS nicer than the bot (as the worker's os.nice).
    Set from here, just after the start: a `preexec_fn` would make Python fork the whole
    bot (hundreds of MB) on the event loop instead of using vfork. The command has run
    for a few microseconds at the bot's priority by then, which does not matter."""
    niceness = min(19, os.getpriority(os.PRIO_PROCESS, 0) + POLL_NICENESS)
    # Gone already (a quick command), or not ours to change (a setuid wrapper): it just
    # runs at the bot's priority.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.setpriority(os.PRIO_PROCESS, pid, niceness)


async def _reap(process: asyncio.subprocess.Process) -> None:
    """Kill the command's process group (it leads one: start_new_session), then wait."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    await process.wait()


def _slurm_environment(slurm_conf: str | None = None) -> dict[str, str]:
    # Slurm's own variables (SLURM_CONF, …) matter; a user's SQUEUE_FORMAT etc. must not.
    keep = {"PATH", "LANG", "LC_ALL", "TZ", "HOME", "SLURM_CONF"}
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.setdefault("PATH", "/usr/bin:/bin")
    if slurm_conf is not None:
        env["SLURM_CONF"] = slurm_conf
    return env
