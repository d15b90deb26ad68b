"""What the stand-in saw, plus a way to wait for it.

Every journal append wakes waiters, so tests await the thing they expect ("a chat.postMessage
to D123") with a deadline instead of sleeping and hoping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

T = TypeVar("T")


class _CallFields(NamedTuple):
    method: str
    params: dict[str, Any]
    token: str | None


class Call(_CallFields):
    """One Web API request as received; unpacks as ``(method, params, token)``.

    ``status`` and ``response`` hold what the stand-in answered, so a test can tell an injected
    429 from the retry that followed it (``call.ok``); ``at`` is when the request arrived, on
    the event loop's clock (fast-forwarded under looptime, as the bot's waits are).
    """

    status: int
    response: dict[str, Any]
    at: float

    def __new__(
        cls,
        method: str,
        params: dict[str, Any],
        token: str | None,
        status: int = 200,
        response: dict[str, Any] | None = None,
        at: float = 0.0,
    ) -> Call:
        self = super().__new__(cls, method, params, token)
        self.status = status
        self.response = response if response is not None else {}
        self.at = at
        return self

    @property
    def ok(self) -> bool:
        """True if Slack would have called this a success (HTTP 200 and ``ok: true``)."""
        return self.status == 200 and self.response.get("ok") is True


@dataclass
class ResponseUrlPost:
    """A body the bot POSTed to a slash command's response_url."""

    url: str
    body: dict[str, Any]
    command: dict[str, Any] | None  # the slash-command payload that issued this response_url


@dataclass
class UploadedFile:
    """A file going through the upload v2 flow (getUploadURLExternal → POST → complete)."""

    id: str
    filename: str
    length: int
    content: bytes | None = None
    title: str | None = None
    completed: bool = False
    channel_id: str | None = None
    initial_comment: str | None = None
    thread_ts: str | None = None


class Journal(Generic[T]):
    """An append-only list whose appends wake ``wait_for`` callers."""

    def __init__(self) -> None:
        self.items: list[T] = []
        self._changed = asyncio.Event()

    def append(self, item: T) -> None:
        self.items.append(item)
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(
        self,
        predicate: Callable[[T], bool],
        *,
        count: int = 1,
        timeout: float = 5.0,
        what: str = "items",
    ) -> list[T]:
        """Return the first ``count`` matching items (already seen or still to come)."""
        matches: list[T] = []
        try:
            async with asyncio.timeout(timeout):
                while True:
                    changed = self._changed
                    matches = [item for item in self.items if predicate(item)]
                    if len(matches) >= count:
                        return matches[:count]
                    await changed.wait()
        except TimeoutError:
            raise TimeoutError(
                f"waited {timeout}s for {count} {what}, saw {len(matches)}"
            ) from None
