"""The plain-HTTP endpoints: Web API methods, the upload URL and slash-command response_urls.

Token checks and fault injection happen here, before any method logic, as on the real
service: a bad token never reaches chat.postMessage, and an injected 429 is served regardless
of what the method would have done.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import time
from collections.abc import Callable
from typing import Any

from aiohttp import BodyPartReader, web

from .faults import FaultBook
from .records import Call, Journal, ResponseUrlPost
from .socket_mode import SocketModeHub
from .web_api import SlackError, WebApi
from .workspace import Workspace

APP_TOKEN_METHODS = frozenset({"apps.connections.open"})
EITHER_TOKEN_METHODS = frozenset({"auth.test"})
Answer = tuple[int, dict[str, Any], dict[str, str]]


async def request_params(request: web.Request) -> dict[str, Any]:
    """Merge query string, form and JSON bodies: slack_sdk uses all three depending on method."""
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        body = await request.json() if request.can_read_body else {}
        if isinstance(body, dict):
            params.update(body)
    elif request.can_read_body:
        params.update({k: v for k, v in (await request.post()).items() if isinstance(v, str)})
    return params


def bearer_token(request: web.Request, params: dict[str, Any]) -> str | None:
    """Slack takes the token from the Authorization header or, failing that, a token param."""
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        return header.removeprefix("Bearer ").strip()
    token = params.pop("token", None)
    return str(token) if token else None


class HttpRoutes:
    """Handlers plus what they record (calls, response_url posts)."""

    def __init__(self, workspace: Workspace, api: WebApi, socket: SocketModeHub) -> None:
        self.ws = workspace
        self.api = api
        self.socket = socket
        self.faults = FaultBook()
        self.calls: Journal[Call] = Journal()
        self.response_posts: Journal[ResponseUrlPost] = Journal()
        self.root_url = ""  # set once the server knows its port
        self._hooks: dict[str, dict[str, Any] | None] = {}
        # While set, every call with the bot token answers this error (a revoked or
        # deactivated token), until it is cleared again.
        self.bot_token_refusal: str | None = None
        self._hook_ids = itertools.count(1000)
        # Seconds to wait before answering the next requests to a method (a slow Slack).
        self.delays: dict[str, list[float]] = {}
        # Per method: seconds to wait before answering a request already carried out (Slack
        # stored the message, its answer is late), and seconds to hold a request before
        # carrying it out, dropping it if the caller went away meanwhile (it never arrived).
        self.late_answers: dict[str, list[float]] = {}
        self.held_requests: dict[str, list[float]] = {}
        self.holding: Journal[str] = Journal()

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/api/{method}", self.handle_api)
        app.router.add_get("/api/{method}", self.handle_api)
        app.router.add_post("/upload/v1/{file_id}", self.handle_upload)
        app.router.add_post("/commands/{team_id}/{hook_id}/{secret}", self.handle_response_url)

    def new_response_url(self, command: dict[str, Any] | None = None) -> str:
        """A unique response_url here, remembering the command it was issued for."""
        path = f"commands/{self.ws.team_id}/{next(self._hook_ids)}/{secrets.token_hex(12)}"
        self._hooks[path] = command
        return f"{self.root_url}{path}"

    def attach_command(self, response_url: str, command: dict[str, Any]) -> None:
        self._hooks[response_url.removeprefix(self.root_url)] = command

    async def handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        arrived = asyncio.get_running_loop().time()
        params = await request_params(request)
        await self.wait_if_delayed(method)
        token = bearer_token(request, params)
        if not await self._held_until_answered(method, request):
            return web.json_response({"ok": False, "error": "caller_gone"}, status=499)
        status, body, headers = self.answer(method, params, token)
        if token == self.ws.bot_token and self.ws.bot_scopes is not None:
            # Like Slack: every call made with a valid token says what that token may do.
            headers = {**headers, "x-oauth-scopes": self.ws.bot_scopes}
        late = self.late_answers.get(method)
        if late:
            # On the loop's clock, as the sleep it replaces: fast-forwarded under looptime.
            clock = asyncio.get_running_loop().time
            await _until_or_gone(request, clock() + late.pop(0), clock)
        self.calls.append(Call(method, params, token, status, body, arrived))
        return web.json_response(body, status=status, headers=headers)

    async def wait_if_delayed(self, method: str) -> None:
        waits = self.delays.get(method)
        if waits:
            await asyncio.sleep(waits.pop(0))

    async def _held_until_answered(self, method: str, request: web.Request) -> bool:
        """False if the request was held and its caller went away before it was let through."""
        holds = self.held_requests.get(method)
        if not holds:
            return True
        self.holding.append(method)
        return await _until_or_gone(request, time.monotonic() + holds.pop(0), time.monotonic)

    def answer(self, method: str, params: dict[str, Any], token: str | None) -> Answer:
        if not token:
            return 200, {"ok": False, "error": "not_authed"}, {}
        if token not in (self.ws.bot_token, self.ws.app_token):
            return 200, {"ok": False, "error": "invalid_auth"}, {}
        if token == self.ws.bot_token and self.bot_token_refusal is not None:
            return 200, {"ok": False, "error": self.bot_token_refusal}, {}
        is_app = token == self.ws.app_token
        if method not in EITHER_TOKEN_METHODS and is_app != (method in APP_TOKEN_METHODS):
            return 200, {"ok": False, "error": "not_allowed_token_type"}, {}
        fault = self.faults.take(method)
        if fault is not None:
            return fault.status, {"ok": False, "error": fault.error}, fault.headers
        if method == "apps.connections.open":
            return 200, {"ok": True, "url": self.socket.issue_url()}, {}
        handler = self.api.handlers.get(method)
        if handler is None:
            return 200, {"ok": False, "error": "unknown_method", "req_method": method}, {}
        try:
            return 200, {"ok": True, **handler(params)}, {}
        except SlackError as exc:
            return 200, {"ok": False, "error": exc.error}, {}

    async def handle_upload(self, request: web.Request) -> web.Response:
        """Like files.slack.com: raw bytes (or a multipart file) in, ``OK - <n>`` text out."""
        fault = self.faults.take("upload")
        if fault is not None:
            return web.Response(status=fault.status, text=fault.error, headers=fault.headers)
        if request.content_type.startswith("multipart/"):
            part = await (await request.multipart()).next()
            data = bytes(await part.read()) if isinstance(part, BodyPartReader) else b""
        else:
            data = await request.read()
        if not self.api.store_upload(request.match_info["file_id"], data):
            return web.Response(status=404, text="file_not_found")
        return web.Response(text=f"OK - {len(data)}")

    async def handle_response_url(self, request: web.Request) -> web.Response:
        """Record what the bot says via response_url; Slack answers a plain ``ok``."""
        path = request.path.lstrip("/")
        await self.wait_if_delayed("response_url")
        if path not in self._hooks:
            return web.Response(status=404, text="no_active_hooks")
        fault = self.faults.take("response_url")
        if fault is not None:
            return web.Response(status=fault.status, text=fault.error, headers=fault.headers)
        raw = await request.text()
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = dict(await request.post())
        post = ResponseUrlPost(url=f"{self.root_url}{path}", body=body, command=self._hooks[path])
        self.response_posts.append(post)
        return web.Response(text="ok")


async def _until_or_gone(request: web.Request, until: float, clock: Callable[[], float]) -> bool:
    """Wait until `until` on `clock`; False as soon as the caller has gone away (a late
    answer then goes nowhere, and the stand-in's shutdown need not wait it out)."""
    while clock() < until:
        if request.transport is None or request.transport.is_closing():
            return False
        await asyncio.sleep(0.05)
    return True
