"""SlackStandIn: a local aiohttp server speaking enough of Slack for end-to-end tests.

The real slack_sdk / Bolt clients talk to it over HTTP and websockets on 127.0.0.1; nothing is
patched, so a test exercises the same code paths (auth headers, retries, Socket Mode
reconnects) that production does. This class wires the parts together and is the one object
tests hold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

from aiohttp import web
from slack_sdk.web.async_client import AsyncWebClient

from .http_routes import HttpRoutes
from .payloads import (
    ButtonClick,
    app_home_opened_event,
    block_actions_payload,
    events_api_envelope,
    home_block_actions_payload,
    interactive_envelope,
    slash_command_payload,
    slash_commands_envelope,
)
from .records import Call, ResponseUrlPost, UploadedFile
from .signing import SignedRequest, signed_block_action, signed_slash_command
from .socket_mode import Delivery, SocketConnection, SocketModeHub
from .views import (
    OpenModal,
    apply_answer,
    post_signed,
    state_values,
    view_submission_payload,
)
from .web_api import Handler, WebApi
from .workspace import SlackChannel, SlackUser, Workspace


class SlackStandIn:
    """Use as ``async with SlackStandIn(users=[...]) as slack:``; aim clients at ``api_url``.

    Keyword arguments other than ``users`` set ``Workspace`` fields (tokens, team_id, ...).
    """

    def __init__(self, *, users: Iterable[SlackUser] = (), **workspace: Any) -> None:
        self.workspace = Workspace(**workspace)
        for user in users:
            self.workspace.add_user(user)
        self.api = WebApi(self.workspace)
        self.socket = SocketModeHub(self.workspace.app_id)
        self.http = HttpRoutes(self.workspace, self.api, self.socket)
        self._runner: web.AppRunner | None = None
        self.root_url = ""

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on 127.0.0.1 on a free port chosen by the OS."""
        app = web.Application()
        self.http.add_routes(app)
        app.router.add_get("/link/", self.socket.handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        host, port = self._runner.addresses[0][:2]
        self.root_url = self.http.root_url = f"http://{host}:{port}/"
        self.api.upload_url_base = f"{self.root_url}upload/v1/"
        self.socket.ws_url_base = f"ws://{host}:{port}/link/"

    async def stop(self) -> None:
        """Close websockets first so the server can shut down without waiting on them.

        Close Socket Mode clients before this, or they will (correctly) try to reconnect.
        """
        if self._runner is None:
            return
        await self.socket.drop_connections()
        await self._runner.cleanup()
        self._runner = None

    async def __aenter__(self) -> SlackStandIn:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- configuration -------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """Pass as ``base_url`` to AsyncWebClient (slack_sdk joins method names onto it)."""
        return f"{self.root_url}api/"

    @property
    def bot_token(self) -> str:
        return self.workspace.bot_token

    @property
    def app_token(self) -> str:
        return self.workspace.app_token

    def web_client(self, token: str | None = None, **kwargs: Any) -> AsyncWebClient:
        """A real AsyncWebClient aimed at this server (bot token unless told otherwise)."""
        return AsyncWebClient(token=token or self.bot_token, base_url=self.api_url, **kwargs)

    def add_user(self, user: SlackUser) -> SlackUser:
        return self.workspace.add_user(user)

    def add_channel(self, channel: SlackChannel) -> SlackChannel:
        return self.workspace.add_channel(channel)

    def register_method(self, method: str, handler: Handler) -> None:
        """Serve an extra Web API method; raise ``SlackError(code)`` for an ``ok: false``."""
        self.api.handlers[method] = handler

    def fail_next(
        self,
        method: str,
        *,
        status: int = 200,
        error: str | None = None,
        retry_after: int | None = None,
        times: int = 1,
    ) -> None:
        """Make the next ``times`` requests to ``method`` fail (after the token check).

        429 → ``ratelimited`` with a Retry-After header (default 1s); other non-200 statuses →
        that status with ``ok: false``; status 200 needs ``error`` (a permanent API error).
        ``method`` may also be "upload" or "response_url" for those endpoints.
        """
        self.http.faults.add(
            method, status=status, error=error, retry_after=retry_after, times=times
        )

    def delay_next(self, method: str, seconds: float, *, times: int = 1) -> None:
        """Answer the next ``times`` requests to ``method`` (or "response_url") only after
        ``seconds``: Slack having a slow moment."""
        self.http.delays.setdefault(method, []).extend([seconds] * times)

    def answer_late(self, method: str, seconds: float, *, times: int = 1) -> None:
        """Carry out the next ``times`` requests to ``method`` at once (a message is stored and
        shows in conversations.history) but send the answer only ``seconds`` later."""
        self.http.late_answers.setdefault(method, []).extend([seconds] * times)

    def hold_next(self, method: str, seconds: float, *, times: int = 1) -> None:
        """Hold the next ``times`` requests to ``method`` for ``seconds`` before carrying them
        out; one whose caller goes away meanwhile is dropped, never carried out (as if the
        caller died before its request left). ``holding`` says when one is held."""
        self.http.held_requests.setdefault(method, []).extend([seconds] * times)

    async def wait_until_holding(self, method: str, *, timeout: float = 10.0) -> None:
        await self.http.holding.wait_for(lambda m: m == method, timeout=timeout, what=method)

    def refuse_bot_token(self, error: str = "account_inactive") -> None:
        """From now on every call with the bot token fails with ``error`` (ok: false), as when
        Slack deactivates or revokes it, until ``accept_bot_token()``."""
        self.http.bot_token_refusal = error

    def accept_bot_token(self) -> None:
        self.http.bot_token_refusal = None

    # -- recorded state ------------------------------------------------------------------------

    @property
    def calls(self) -> list[Call]:
        """Every Web API request, including rejected and fault-injected ones."""
        return self.http.calls.items

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    async def wait_for_calls(
        self,
        method: str,
        count: int,
        *,
        timeout: float = 5.0,
        predicate: Callable[[Call], bool] | None = None,
    ) -> list[Call]:
        """The first ``count`` calls to ``method`` matching ``predicate``, past or future."""
        return await self.http.calls.wait_for(
            lambda c: c.method == method and (predicate is None or predicate(c)),
            count=count,
            timeout=timeout,
            what=f"{method} calls",
        )

    async def wait_for_call(
        self,
        method: str,
        *,
        timeout: float = 5.0,
        predicate: Callable[[Call], bool] | None = None,
    ) -> Call:
        """The first call to ``method`` matching ``predicate`` (e.g. ``lambda c: c.ok``)."""
        return (await self.wait_for_calls(method, 1, timeout=timeout, predicate=predicate))[0]

    @property
    def messages(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Posted (and updated) messages by (channel, ts)."""
        return self.api.messages

    @property
    def home_views(self) -> dict[str, dict[str, Any]]:
        """The last view published to each user's App Home."""
        return self.api.home_views

    @property
    def files(self) -> dict[str, UploadedFile]:
        return self.api.files

    def dm_channel_for(self, user_id: str) -> str:
        """The D… id conversations.open returns (or will return) for this user."""
        return self.api.dm_channel_for(user_id)

    @property
    def response_url_posts(self) -> list[ResponseUrlPost]:
        return self.http.response_posts.items

    async def wait_for_response_url_post(
        self,
        *,
        url: str | None = None,
        timeout: float = 5.0,
        predicate: Callable[[ResponseUrlPost], bool] | None = None,
    ) -> ResponseUrlPost:
        """The first post to ``url`` (any response_url if None) matching ``predicate``."""
        posts = await self.http.response_posts.wait_for(
            lambda p: (url is None or p.url == url) and (predicate is None or predicate(p)),
            timeout=timeout,
            what="response_url posts",
        )
        return posts[0]

    def new_response_url(self, command: dict[str, Any] | None = None) -> str:
        return self.http.new_response_url(command)

    # -- modals --------------------------------------------------------------------------------

    @property
    def modals(self) -> dict[str, OpenModal]:
        """Every modal opened with views.open, by view id, oldest first."""
        return self.api.modals

    async def wait_for_modal(self, *, timeout: float = 5.0) -> OpenModal:
        """The last modal opened, once there is one."""
        call = await self.wait_for_call("views.open", timeout=timeout, predicate=lambda c: c.ok)
        assert call.ok
        return list(self.modals.values())[-1]

    def view_submission_payload(
        self, modal: OpenModal, *, user_id: str, answers: dict[str, str | None] | None = None
    ) -> dict[str, Any]:
        """`user_id` submitting `modal` as it is now, inputs left as the view set them except
        `answers` (block id -> value typed or option chosen, even one the view does not offer)."""
        workspace = self.workspace
        return view_submission_payload(
            modal.view,
            state_values(modal.view, answers or {}),
            team_id=workspace.team_id,
            user_id=user_id,
            user_name=self._user_name(user_id),
            api_app_id=workspace.app_id,
        )

    async def submit_view(
        self,
        modal: OpenModal,
        *,
        user_id: str,
        answers: dict[str, str | None] | None = None,
        url: str | None = None,
        signing_secret: str = "",
        timeout: float = 3.0,
    ) -> dict[str, Any] | None:
        """Submit `modal` as `user_id`: POSTed to `url` signed as Slack signs it (HTTP mode),
        else over Socket Mode; the app's answer (None: an empty one, which closes the modal)
        must come within `timeout` (Slack's 3 s), and is applied as Slack applies it."""
        payload = self.view_submission_payload(modal, user_id=user_id, answers=answers)
        if url is None:
            delivery = await self.socket.send(interactive_envelope(payload), timeout)
            answer = delivery.payload or None
        else:
            signed = signed_block_action(signing_secret, payload)
            answer = await post_signed(url, signed, timeout)
        apply_answer(modal, answer)
        return answer

    # -- Socket Mode ---------------------------------------------------------------------------

    @property
    def socket_connections(self) -> list[SocketConnection]:
        """Every connection ever accepted, oldest first (``.open`` says which still are)."""
        return self.socket.connections.items

    async def wait_for_socket_connection(
        self, count: int = 1, *, timeout: float = 5.0
    ) -> SocketConnection:
        """Wait until ``count`` connections were accepted in total (so 2 = one reconnect)."""
        return await self.socket.wait_for_connection(count, timeout)

    async def request_reconnect(self, reason: str = "refresh_requested") -> None:
        """Send Slack's ``disconnect`` frame to every open connection."""
        await self.socket.request_reconnect(reason)

    async def drop_socket_connections(self) -> None:
        """Close every connection from the server side."""
        await self.socket.drop_connections()

    def cut_socket_connections(self) -> None:
        """Cut every connection's TCP link without a websocket close frame."""
        self.socket.cut_connections()

    async def take_socket_mode_down(self) -> None:
        """A Socket Mode outage: close every connection and refuse new ones until
        ``bring_socket_mode_up()`` (the Web API keeps answering)."""
        self.socket.accepting = False
        await self.socket.drop_connections()

    def bring_socket_mode_up(self) -> None:
        self.socket.accepting = True

    async def send_envelope(self, envelope: dict[str, Any], *, timeout: float = 5.0) -> Delivery:
        """Push any prebuilt envelope (e.g. ``interactive``) and await its ack."""
        return await self.socket.send(envelope, timeout)

    def slash_command_payload(
        self,
        *,
        command: str,
        text: str = "",
        user_id: str = "U1",
        channel_id: str = "C1",
        team_id: str | None = None,
        user_name: str | None = None,
        channel_name: str = "general",
        **extra: Any,
    ) -> dict[str, str]:
        """Slash-command fields with this workspace's defaults and a fresh response_url here."""
        payload = slash_command_payload(
            command=command,
            text=text,
            user_id=user_id,
            user_name=user_name or self._user_name(user_id),
            channel_id=channel_id,
            channel_name=channel_name,
            team_id=team_id or self.workspace.team_id,
            team_domain=self.workspace.team_domain,
            api_app_id=self.workspace.app_id,
            response_url="",
            **extra,
        )
        payload["response_url"] = self.new_response_url(payload)
        return payload

    def _user_name(self, user_id: str) -> str:
        user = self.workspace.users.get(user_id)
        return user.name if user else user_id.lower()

    def block_action_payload(
        self, *, user_id: str, action_id: str, value: str, channel_id: str | None = None
    ) -> dict[str, Any]:
        """A button click by `user_id` in this workspace, with a fresh response_url here: on
        an ephemeral answer, or (`channel_id`) on a message the bot posted there, e.g. a DM."""
        return block_actions_payload(
            self._click(user_id, action_id, value),
            response_url=self.new_response_url(),
            channel_id=channel_id or "C1",
            ephemeral=channel_id is None,
        )

    def home_block_action_payload(
        self, *, user_id: str, action_id: str, value: str, viewer: str | None = None
    ) -> dict[str, Any]:
        """A click on a Home tab button: no response_url. The view is the one published for
        `viewer` (default: the clicker)."""
        return home_block_actions_payload(
            self._click(user_id, action_id, value),
            view=self.home_views.get(viewer or user_id, {}),
        )

    def _click(self, user_id: str, action_id: str, value: str) -> ButtonClick:
        workspace = self.workspace
        name = self._user_name(user_id)
        return ButtonClick(workspace.team_id, user_id, name, workspace.app_id, action_id, value)

    async def send_block_action(self, payload: dict[str, Any], *, timeout: float = 3.0) -> Delivery:
        """A button click over Socket Mode; the ack must come within `timeout` (Slack's 3 s)."""
        return await self.socket.send(interactive_envelope(payload), timeout)

    async def send_slash_command(
        self, *, command: str, timeout: float = 5.0, **fields: Any
    ) -> Delivery:
        """Deliver a slash command over Socket Mode and return the client's ack.

        ``fields`` are those of ``slash_command_payload`` (text, user_id, team_id, channel_id,
        user_name, channel_name, trigger_id, is_enterprise_install, enterprise_id, ...).
        """
        envelope = slash_commands_envelope(self.slash_command_payload(command=command, **fields))
        return await self.socket.send(envelope, timeout)

    async def slash_command_answer(
        self, *, command: str, timeout: float = 5.0, later: float = 60.0, **fields: Any
    ) -> dict[str, Any]:
        """The answer to a slash command as its asker sees it: the ack's, or, when the ack
        says it is working on it (skybot acks within 1 s; the runner may take longer), the
        answer that follows by response_url within `later` seconds."""
        payload = self.slash_command_payload(command=command, **fields)
        delivery = await self.socket.send(slash_commands_envelope(payload), timeout)
        assert delivery.payload is not None, f"no ack for {command} {fields.get('text')!r}"
        if not str(delivery.payload.get("text", "")).startswith("⏳ Working on"):
            return delivery.payload
        post = await self.wait_for_response_url_post(url=payload["response_url"], timeout=later)
        return post.body

    async def send_event(
        self,
        event: dict[str, Any],
        *,
        timeout: float = 5.0,
        event_id: str | None = None,
        retry_attempt: int = 0,
        retry_reason: str = "",
    ) -> Delivery:
        """Deliver an Events API event (``events_api`` envelope) and return the ack."""
        envelope = events_api_envelope(
            event,
            team_id=self.workspace.team_id,
            api_app_id=self.workspace.app_id,
            bot_user_id=self.workspace.bot_user_id,
            event_id=event_id,
            retry_attempt=retry_attempt,
            retry_reason=retry_reason,
        )
        return await self.socket.send(envelope, timeout)

    async def send_app_home_opened(
        self, user_id: str, *, tab: str = "home", timeout: float = 5.0
    ) -> Delivery:
        event = app_home_opened_event(
            user_id=user_id,
            channel_id=self.dm_channel_for(user_id),
            app_id=self.workspace.app_id,
            team_id=self.workspace.team_id,
            tab=tab,
        )
        return await self.send_event(event, timeout=timeout)

    # -- HTTP mode -----------------------------------------------------------------------------

    def signed_slash_command(
        self, signing_secret: str, *, command: str, **kwargs: Any
    ) -> SignedRequest:
        """A signed HTTP-mode slash command whose response_url points at this server.

        Accepts ``signed_slash_command``'s options (``wrong_secret``, ``age_seconds``, ...).
        """
        user_id = kwargs.pop("user_id", "U1")
        request = signed_slash_command(
            signing_secret,
            command=command,
            user_id=user_id,
            user_name=kwargs.pop("user_name", None) or self._user_name(user_id),
            team_id=kwargs.pop("team_id", self.workspace.team_id),
            team_domain=self.workspace.team_domain,
            api_app_id=self.workspace.app_id,
            response_url=self.new_response_url(None),
            **kwargs,
        )
        self.http.attach_command(request.payload["response_url"], request.payload)
        return request
