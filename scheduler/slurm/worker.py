"""The poll worker: one long-lived child process that digests each poll's Slurm output.

Decoding and parsing `squeue --json` holds the interpreter for seconds at 100,000 jobs; in
the bot's process that stalls every slash command's answer (issue 17). The child does it
instead, and sends back only what changed (scheduler/slurm/digester.py). It is a plain
`python -c` child speaking length-prefixed pickles over its stdin and stdout, rather than a
multiprocessing pool: it imports only the parsing code (multiprocessing's spawn would
re-import the bot's `__main__`), the loop reads its answers without a thread, and a stuck
or dead child is killed and replaced by its pid.

A child that dies or does not answer in time fails that poll like a Slurm error would; the
next poll starts a new child, whose first digest is a full one.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import os
import pickle
import struct
import sys
import traceback
from pathlib import Path
from typing import Any, BinaryIO

from core.gc_pauses import no_collections
from scheduler.slurm.commands import POLL_NICENESS, SlurmCommandError
from scheduler.slurm.digester import PollDigester
from scheduler.slurm.wire import ChangedJobsRequest, DigestRequest, PollDigest

log = logging.getLogger(__name__)

_LENGTH = struct.Struct("!Q")
# Answers bigger than this are unpickled on a thread (a first, full digest of 100,000 jobs
# is tens of MB); a steady-state answer is unpickled right away.
_UNPICKLE_INLINE_BYTES = 1 << 20
# The checkout (or site-packages) root that holds scheduler/: three levels up.
_ROOT = str(Path(__file__).resolve().parents[2])
_CHILD = (
    "import sys; sys.path.insert(0, sys.argv[1]); from scheduler.slurm.worker import serve; serve()"
)


class PollWorkerError(Exception):
    """The worker died, or did not answer in time; it is replaced on the next call."""


class PollWorker:
    """The loop's handle on the child: `await worker.digest(request, timeout)`."""

    def __init__(self) -> None:
        self._process: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def start(self) -> None:
        """Start the child now rather than at the first call (its start costs ~0.3 s)."""
        async with self._lock:
            await self._started()

    async def digest(self, request: DigestRequest, timeout: float) -> PollDigest:
        digest = await self._call(request, timeout)
        assert isinstance(digest, PollDigest)
        return digest

    async def changed_jobs(self, request: ChangedJobsRequest, timeout: float) -> list[str]:
        job_ids = await self._call(request, timeout)
        assert isinstance(job_ids, list)
        return job_ids

    async def _call(self, request: DigestRequest | ChangedJobsRequest, timeout: float) -> object:
        async with self._lock:
            process = await self._started()
            assert process.stdin is not None and process.stdout is not None
            try:
                asked = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
                process.stdin.write(_LENGTH.pack(len(asked)) + asked)
                await process.stdin.drain()
                frames = await asyncio.wait_for(_read_frames(process.stdout), timeout)
            except TimeoutError:
                await self._stop(kill=True)
                raise PollWorkerError(f"poll worker gave no answer in {timeout:g} s") from None
            except (asyncio.IncompleteReadError, ConnectionError) as error:
                code = await self._stop(kill=True)
                raise PollWorkerError(f"poll worker died (exit status {code})") from error
            except asyncio.CancelledError:
                await self._stop(kill=True)
                raise
        message, buffers = frames[0], frames[1:]
        if len(message) > _UNPICKLE_INLINE_BYTES:
            ok, value = await asyncio.to_thread(_unpickled, message, buffers)
        else:
            ok, value = _unpickled(message, buffers)
        if not ok:
            raise value
        return value

    async def close(self) -> None:
        """Ask the child to exit (end of its input); kill it if it does not, promptly."""
        async with self._lock:
            await self._stop(kill=False)

    async def _started(self) -> asyncio.subprocess.Process:
        if self._process is None or self._process.returncode is not None:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                _CHILD,
                _ROOT,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                # Its tracebacks, if any, go where the bot's own go.
                stderr=None,
                # Large answers: read them in big chunks.
                limit=1 << 20,
            )
            log.info("poll worker started (pid %d)", self._process.pid)
        return self._process

    async def _stop(self, kill: bool) -> int | None:
        process, self._process = self._process, None
        if process is None:
            return None
        if process.stdin is not None:
            process.stdin.close()
        if kill:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        try:
            return await asyncio.wait_for(process.wait(), 2.0)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            return await process.wait()


def _unpickled(message: bytearray, buffers: list[bytearray]) -> tuple[bool, Any]:
    """The answer, unpickled with no automatic collection: measured at 100,000 jobs
    (benchmarks/poll_ack_latency.py --probe), unpickling 5,000 observed jobs set off young
    collections of 25-85 ms on the unpickling thread, which hold the event loop too."""
    with no_collections():
        answer: tuple[bool, Any] = pickle.loads(message, buffers=buffers)
    return answer


async def _read_frames(stream: asyncio.StreamReader) -> list[bytearray]:
    """An answer: its pickle, then the out-of-band buffers it refers to (see serve)."""
    (count,) = _LENGTH.unpack(await stream.readexactly(_LENGTH.size))
    frames = []
    for _ in range(1 + count):
        (length,) = _LENGTH.unpack(await stream.readexactly(_LENGTH.size))
        frames.append(await _read_into(stream, length))
    return frames


async def _read_into(stream: asyncio.StreamReader, length: int) -> bytearray:
    """`length` bytes from the stream, in one buffer of that size: `readexactly` would hold a
    first, full digest (100 MB at 100,000 jobs) twice, in its buffer and in its copy."""
    payload = bytearray(length)
    view = memoryview(payload)
    filled = 0
    while filled < length:
        chunk = await stream.read(min(length - filled, 1 << 20))
        if not chunk:
            raise asyncio.IncompleteReadError(bytes(view[:filled]), length)
        view[filled : filled + len(chunk)] = chunk
        filled += len(chunk)
    return payload


def serve(requests: BinaryIO | None = None, answers: BinaryIO | None = None) -> None:
    """The child's main loop: one request in, one answer out, until its input ends."""
    if answers is None:
        # The protocol owns the real stdout; anything printed goes to stderr instead.
        answers = os.fdopen(os.dup(1), "wb")
        os.dup2(2, 1)
    requests = requests or sys.stdin.buffer
    # A poll can wait; an answer cannot. On a small host, the bot's own process gets the CPU
    # first while the worker digests.
    os.nice(POLL_NICENESS)
    # What the digester keeps (100,000 jobs: some 300,000 tracked objects) holds no cycles.
    # Left to the collector, full collections over it cost a second of every steady poll
    # at that size; instead, a poll runs with no collection at all, and after its answer
    # the poll's cyclic garbage (if any) is collected and what survives is frozen, out of
    # every later collection's reach. A poll's garbage without cycles is freed as usual.
    gc.disable()
    digester = PollDigester()
    while header := requests.read(_LENGTH.size):
        if len(header) < _LENGTH.size:
            return
        (length,) = _LENGTH.unpack(header)
        request = pickle.loads(requests.read(length))
        answer: tuple[bool, Any]
        try:
            answer = (True, digester.handle(request))
        except SlurmCommandError as error:
            answer = (False, error)
        except Exception as error:  # a bug: the poll fails, the traceback goes to the log
            traceback.print_exc()
            answer = (False, PollWorkerError(f"poll worker failed: {error!r}"))
        # Large parts (Packed chunks of rows and jobs) go out of band: written as they are,
        # not copied into the pickle.
        buffers: list[pickle.PickleBuffer] = []
        message = pickle.dumps(answer, protocol=5, buffer_callback=buffers.append)
        if not _answered(answers, message, buffers):
            _exit_quietly()
        del request, answer, message, buffers
        gc.collect()
        gc.freeze()
        _return_free_memory()


def _answered(answers: BinaryIO, message: bytes, buffers: list[pickle.PickleBuffer]) -> bool:
    """Write one answer; False if the bot is gone (killed: the pipe has no reader left).
    Each frame is written apart from its length: joined, a 100 MB answer would be copied
    once more."""
    try:
        answers.write(_LENGTH.pack(len(buffers)))
        for frame in (memoryview(message), *(buffer.raw() for buffer in buffers)):
            answers.write(_LENGTH.pack(frame.nbytes))
            answers.write(frame)
        answers.flush()
    except BrokenPipeError:
        return False
    return True


def _exit_quietly() -> None:
    """The bot that asked is gone (kill -9 mid-poll): nobody reads the answer, and nothing
    is wrong with the worker. Exit at once, without the traceback a broken pipe would print,
    nor the one Python prints when it flushes what is still buffered for that pipe."""
    os._exit(0)


def _return_free_memory() -> None:
    """Give the C allocator's free pages back to the system (glibc's malloc_trim): a poll's
    documents and decoded records are freed after it, but left in the heap they keep the
    worker's resting RSS 40-50 MB higher at 100,000 jobs, which the next poll then adds
    its own to. Elsewhere than glibc, nothing to do."""
    if _malloc_trim is not None:
        _malloc_trim(0)


def _find_malloc_trim() -> Any:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


_malloc_trim = _find_malloc_trim()
