"""Slack's side of Socket Mode: wss tickets, hello, envelopes out, acks back.

Envelopes go to the newest open connection (Slack picks one of the app's connections); acks are
matched by envelope_id, so concurrent sends and acks arriving on a replacement connection work.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

from .payloads import disconnect_message, hello_message
from .records import Journal


@dataclass
class SocketConnection:
    """One accepted websocket, with every frame the client sent on it."""

    id: int
    ws: web.WebSocketResponse
    received: list[dict[str, Any]] = field(default_factory=list)
    # The TCP connection under the websocket, to cut it without a close frame.
    transport: asyncio.BaseTransport | None = None

    @property
    def open(self) -> bool:
        return not self.ws.closed


@dataclass(frozen=True)
class Delivery:
    """An envelope we pushed and the ack the client sent back for it."""

    envelope: dict[str, Any]
    ack: dict[str, Any]

    @property
    def envelope_id(self) -> str:
        return str(self.envelope["envelope_id"])

    @property
    def payload(self) -> dict[str, Any] | None:
        """The ack's response payload (what Slack would show the user), if any."""
        return self.ack.get("payload")

    @property
    def response_url(self) -> str | None:
        return self.envelope["payload"].get("response_url")


class SocketModeHub:
    """Accepts Socket Mode clients and pushes envelopes to them."""

    def __init__(self, app_id: str) -> None:
        self.app_id = app_id
        self.ws_url_base = ""  # set once the server knows its port
        self.connections: Journal[SocketConnection] = Journal()
        self.acks: Journal[dict[str, Any]] = Journal()
        self._tickets: set[str] = set()
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        # False while Socket Mode is "down": websocket upgrades are refused.
        self.accepting = True

    def issue_url(self) -> str:
        """What apps.connections.open returns: a ticketed ws:// URL on this server."""
        ticket = secrets.token_hex(16)
        self._tickets.add(ticket)
        return f"{self.ws_url_base}?ticket={ticket}&app_id={self.app_id}"

    @property
    def open_connections(self) -> list[SocketConnection]:
        return [c for c in self.connections.items if c.open]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """The websocket endpoint; autoping answers the SDK's ``sdk-ping-pong:<t>`` pings."""
        if request.query.get("ticket") not in self._tickets:
            raise web.HTTPUnauthorized(text="invalid_ticket")
        if not self.accepting:
            raise web.HTTPServiceUnavailable(text="socket mode is down")
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        conn = SocketConnection(id=next(self._ids), ws=ws, transport=request.transport)
        await ws.send_json(
            hello_message(app_id=self.app_id, num_connections=len(self.open_connections) + 1)
        )
        self.connections.append(conn)  # only now may envelopes go out, after hello
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    self._on_text(conn, msg.data)
        except ConnectionResetError:
            # A ping that arrived as the stand-in shut down: its pong has nowhere to go. Slack
            # would drop the connection too; a traceback here said nothing about the client.
            pass
        return ws

    def _on_text(self, conn: SocketConnection, data: str) -> None:
        try:
            frame = json.loads(data)
        except json.JSONDecodeError:
            return
        if not isinstance(frame, dict):
            return
        conn.received.append(frame)
        envelope_id = frame.get("envelope_id")
        if envelope_id is None:
            return
        self.acks.append(frame)
        future = self._pending.get(str(envelope_id))
        if future is not None and not future.done():
            future.set_result(frame)

    async def wait_for_connection(self, count: int = 1, timeout: float = 5.0) -> SocketConnection:
        """Wait until ``count`` connections have been accepted in total; return the latest."""
        conns = await self.connections.wait_for(
            lambda c: True, count=count, timeout=timeout, what="socket mode connections"
        )
        return conns[-1]

    async def _current_connection(self) -> SocketConnection:
        while True:
            if self.open_connections:
                return self.open_connections[-1]
            await self.wait_for_connection(len(self.connections.items) + 1, timeout=3600)

    async def send(self, envelope: dict[str, Any], timeout: float = 5.0) -> Delivery:
        """Push ``envelope`` and wait for its ack (TimeoutError if none arrives in time)."""
        envelope_id = str(envelope["envelope_id"])
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[envelope_id] = future
        try:
            async with asyncio.timeout(timeout):
                while True:
                    conn = await self._current_connection()
                    try:
                        await conn.ws.send_json(envelope)
                        break
                    except ConnectionError:  # closed under us; Slack would use another one
                        await asyncio.sleep(0.01)
                ack = await future
        except TimeoutError:
            raise TimeoutError(
                f"no ack for {envelope['type']} envelope {envelope_id} within {timeout}s"
                f" ({len(self.open_connections)} open socket mode connections)"
            ) from None
        finally:
            self._pending.pop(envelope_id, None)
        return Delivery(envelope=envelope, ack=ack)

    async def request_reconnect(self, reason: str = "refresh_requested") -> None:
        """Send Slack's ``disconnect`` frame; the client is expected to open a new connection."""
        for conn in self.open_connections:
            await conn.ws.send_json(disconnect_message(reason))

    def cut_connections(self) -> None:
        """Cut every connection's TCP link with no close frame, as a network or a load
        balancer does; the client learns of it only by reading or pinging."""
        for conn in self.open_connections:
            if conn.transport is not None:
                conn.transport.abort()

    async def drop_connections(self, code: int = WSCloseCode.GOING_AWAY) -> None:
        """Close every connection from the server side, as when Slack's link goes away."""
        for conn in self.open_connections:
            await conn.ws.close(code=code, message=b"standin closing")
