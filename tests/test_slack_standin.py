"""The Slack stand-in, driven only by the real slack_sdk and Bolt clients over 127.0.0.1.

If these pass, tests built on the stand-in exercise genuine wire behaviour: bearer-token
checks, Retry-After retries, the files v2 upload flow, Socket Mode envelopes/acks/reconnects
and Slack's v0 request signing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from tests.support.slack_standin import SlackChannel, SlackStandIn, SlackUser, signed_slash_command

ALICE = SlackUser("U1", "alice", email="Alice@Example.org", real_name="Alice A")
GUEST = SlackUser("U2", "gus", email="gus@example.org", is_restricted=True)
GONE = SlackUser("U3", "old", email="old@example.org", deleted=True)
ROBOT = SlackUser("U4", "robot", is_bot=True)
SLASH_FIELDS = {
    "token",
    "team_id",
    "team_domain",
    "channel_id",
    "channel_name",
    "user_id",
    "user_name",
    "command",
    "text",
    "api_app_id",
    "is_enterprise_install",
    "response_url",
    "trigger_id",
}


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    async with SlackStandIn(users=[ALICE, GUEST, GONE, ROBOT]) as standin:
        yield standin


@pytest.fixture
def client(slack: SlackStandIn) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)


class EchoAcker:
    """A Socket Mode listener that acks with the command text, optionally after a delay."""

    def __init__(self, delays: dict[str, float] | None = None, ack: bool = True) -> None:
        self.delays = delays or {}
        self.ack = ack
        self.requests: list[SocketModeRequest] = []

    async def __call__(self, client: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        self.requests.append(req)
        text = req.payload.get("text", "")
        await asyncio.sleep(self.delays.get(text, 0))
        if not self.ack:
            return
        payload = {"text": f"echo:{text}"} if req.type == "slash_commands" else None
        await client.send_socket_mode_response(SocketModeResponse(req.envelope_id, payload))


@pytest.fixture
async def socket_client(slack: SlackStandIn) -> AsyncIterator[SocketModeClient]:
    web_client = AsyncWebClient(base_url=slack.api_url)  # token comes from app_token
    sm = SocketModeClient(app_token=slack.app_token, web_client=web_client, ping_interval=1)
    frames: list[dict[str, Any]] = []

    async def capture(_c: AsyncBaseSocketModeClient, message: dict[str, Any], _raw: Any) -> None:
        frames.append(message)

    sm.message_listeners.append(capture)
    sm.frames = frames  # type: ignore[attr-defined]
    await sm.connect()
    yield sm
    await sm.close()


# -- Web API -----------------------------------------------------------------------------------


async def test_web_calls_are_answered_and_recorded(
    slack: SlackStandIn, client: AsyncWebClient
) -> None:
    auth = await client.auth_test()
    assert (auth["team_id"], auth["user_id"]) == (
        slack.workspace.team_id,
        slack.workspace.bot_user_id,
    )

    posted = await client.chat_postMessage(
        channel="C42", text="queued", blocks=[{"type": "divider"}]
    )
    assert posted["channel"] == "C42" and posted["message"]["text"] == "queued"
    updated = await client.chat_update(channel="C42", ts=posted["ts"], text="running")
    assert updated["ts"] == posted["ts"]
    assert slack.messages[("C42", posted["ts"])]["text"] == "running"

    dm = await client.conversations_open(users="U1")
    again = await client.conversations_open(users="U1")
    assert dm["channel"]["id"].startswith("D") and again["channel"]["id"] == dm["channel"]["id"]
    eph = await client.chat_postEphemeral(channel="C42", user="U1", text="only you")
    assert eph["message_ts"]

    view = {
        "type": "home",
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}],
    }
    await client.views_publish(user_id="U1", view=view)
    assert slack.home_views["U1"]["blocks"] == view["blocks"]

    method, params, token = slack.calls_to("chat.postMessage")[0]
    assert (method, params["channel"], params["blocks"], token) == (
        "chat.postMessage",
        "C42",
        [{"type": "divider"}],
        slack.bot_token,
    )
    assert [c.method for c in slack.calls] == [
        "auth.test",
        "chat.postMessage",
        "chat.update",
        "conversations.open",
        "conversations.open",
        "chat.postEphemeral",
        "views.publish",
    ]
    assert all(c.ok for c in slack.calls)


async def test_form_json_and_query_params_are_all_understood(
    slack: SlackStandIn, client: AsyncWebClient
) -> None:
    await client.api_call("chat.postMessage", data={"channel": "C1", "text": "form"})
    await client.api_call("chat.postMessage", json={"channel": "C1", "text": "json"})
    info = await client.users_info(user="U1")  # GET with a query string
    assert [c.params["text"] for c in slack.calls_to("chat.postMessage")] == ["form", "json"]
    assert slack.calls_to("users.info")[0].params == {"user": "U1"}
    assert info["user"]["profile"]["email"] == "Alice@Example.org"


async def test_users_info_and_lookup_report_flags_and_errors(client: AsyncWebClient) -> None:
    assert (await client.users_info(user="U2"))["user"]["is_restricted"] is True
    assert (await client.users_info(user="U3"))["user"]["deleted"] is True
    assert (await client.users_info(user="U4"))["user"]["is_bot"] is True
    found = await client.users_lookupByEmail(email="alice@example.ORG")
    assert found["user"]["id"] == "U1"
    with pytest.raises(SlackApiError) as missing:
        await client.users_lookupByEmail(email="nobody@example.org")
    assert missing.value.response["error"] == "users_not_found"
    with pytest.raises(SlackApiError) as unknown:
        await client.users_info(user="U999")
    assert unknown.value.response["error"] == "user_not_found"


async def test_channels_show_the_bot_only_what_slack_would(
    slack: SlackStandIn, client: AsyncWebClient
) -> None:
    slack.add_channel(SlackChannel("C0OUT", "outside", bot_is_member=False))
    slack.add_channel(SlackChannel("G0IN", "inner", is_private=True))
    slack.add_channel(SlackChannel("G0SECRET", "secret", is_private=True, bot_is_member=False))
    slack.add_channel(SlackChannel("C0OLD", "old", is_archived=True))
    assert (await client.conversations_info(channel="C0OUT"))["channel"]["is_member"] is False
    assert (await client.conversations_info(channel="G0IN"))["channel"]["is_private"] is True
    for hidden in ("G0SECRET", "C0NOSUCH"):
        with pytest.raises(SlackApiError) as error:
            await client.conversations_info(channel=hidden)
        assert error.value.response["error"] == "channel_not_found"
    listed = await client.conversations_list(
        types="public_channel,private_channel", exclude_archived=True
    )
    names = sorted(c["name"] for c in listed["channels"])
    assert names == ["inner", "outside", "skynet-users"]
    public = await client.conversations_list(types="public_channel")
    assert sorted(c["name"] for c in public["channels"]) == ["old", "outside", "skynet-users"]


async def test_tokens_are_checked_like_slack(slack: SlackStandIn) -> None:
    bad = AsyncWebClient(token="xoxb-not-ours", base_url=slack.api_url)
    with pytest.raises(SlackApiError) as err:
        await bad.chat_postMessage(channel="C1", text="x")
    assert err.value.response["error"] == "invalid_auth"
    assert slack.calls[-1].token == "xoxb-not-ours" and not slack.calls[-1].ok
    assert slack.messages == {}

    with pytest.raises(SlackApiError) as app_for_chat:
        await slack.web_client(token=slack.app_token).chat_postMessage(channel="C1", text="x")
    assert app_for_chat.value.response["error"] == "not_allowed_token_type"
    with pytest.raises(SlackApiError) as bot_for_socket:
        await slack.web_client().apps_connections_open(app_token=slack.bot_token)
    assert bot_for_socket.value.response["error"] == "not_allowed_token_type"
    opened = await slack.web_client().apps_connections_open(app_token=slack.app_token)
    assert opened["url"].startswith(f"ws://127.0.0.1:{slack.root_url.split(':')[2]}")


# The SDK's Retry-After sleep passes in the event loop's time, fast-forwarded by looptime.
@pytest.mark.looptime
async def test_429_is_retried_after_retry_after(slack: SlackStandIn) -> None:
    slack.fail_next("chat.postMessage", status=429, retry_after=2)
    client = slack.web_client(retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)])
    loop = asyncio.get_running_loop()
    started = loop.time()
    response = await client.chat_postMessage(channel="C1", text="eventually")
    elapsed = loop.time() - started
    assert response["ok"] is True
    assert [(c.status, c.response.get("error")) for c in slack.calls_to("chat.postMessage")] == [
        (429, "ratelimited"),
        (200, None),
    ]
    assert elapsed >= 2.0  # slept for Retry-After (without the header it would be 1-2s)
    assert len(slack.messages) == 1


async def test_429_without_retry_handler_surfaces(slack: SlackStandIn) -> None:
    slack.fail_next("chat.postMessage", status=429, retry_after=7)
    client = slack.web_client(retry_handlers=[])
    with pytest.raises(SlackApiError) as err:
        await client.chat_postMessage(channel="C1", text="x")
    assert err.value.response.status_code == 429
    assert err.value.response.headers["Retry-After"] == "7"


async def test_permanent_errors_and_5xx_for_n_calls(
    slack: SlackStandIn, client: AsyncWebClient
) -> None:
    slack.fail_next("chat.postMessage", error="channel_not_found", times=2)
    slack.fail_next("chat.postMessage", status=500)
    errors = []
    for _ in range(3):
        with pytest.raises(SlackApiError) as err:
            await client.chat_postMessage(channel="C404", text="x")
        errors.append((err.value.response.status_code, err.value.response["error"]))
    assert errors == [
        (200, "channel_not_found"),
        (200, "channel_not_found"),
        (500, "internal_error"),
    ]
    assert (await client.chat_postMessage(channel="C404", text="x"))["ok"] is True
    with pytest.raises(ValueError):
        slack.fail_next("chat.postMessage")  # 200 without an error code is not a failure


async def test_wait_for_call_sees_future_and_past_calls(
    slack: SlackStandIn, client: AsyncWebClient
) -> None:
    await client.chat_postMessage(channel="C1", text="first")

    async def later() -> None:
        await asyncio.sleep(0.05)
        await client.chat_postMessage(channel="D9", text="second")

    task = asyncio.create_task(later())
    call = await slack.wait_for_call(
        "chat.postMessage", predicate=lambda c: c.params["channel"] == "D9"
    )
    assert call.params["text"] == "second"
    assert (await slack.wait_for_call("chat.postMessage")).params["text"] == "first"
    await task
    with pytest.raises(TimeoutError, match=r"views\.publish"):
        await slack.wait_for_call("views.publish", timeout=0.1)


async def test_files_upload_v2_stores_the_bytes(
    slack: SlackStandIn, client: AsyncWebClient
) -> None:
    data = b"\x00\xffjob 123 log\n" * 100
    response = await client.files_upload_v2(
        channel="D1", content=data, filename="job-123.log", title="Job 123", initial_comment="log"
    )
    stored = slack.files[response["file"]["id"]]
    assert stored.content == data and stored.length == len(data)
    assert (stored.filename, stored.title, stored.completed) == ("job-123.log", "Job 123", True)
    assert (stored.channel_id, stored.initial_comment) == ("D1", "log")
    assert [c.method for c in slack.calls] == [
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
    ]


# -- Socket Mode -------------------------------------------------------------------------------


async def test_socket_mode_slash_command_reaches_client_and_ack_returns(
    slack: SlackStandIn, socket_client: SocketModeClient
) -> None:
    acker = EchoAcker()
    socket_client.socket_mode_request_listeners.append(acker)
    delivery = await slack.send_slash_command(
        command="/sky", text="help", user_id="U1", team_id="T1", channel_id="C1"
    )
    assert delivery.ack == {"envelope_id": delivery.envelope_id, "payload": {"text": "echo:help"}}
    envelope = delivery.envelope
    assert envelope["type"] == "slash_commands" and envelope["accepts_response_payload"] is True
    assert set(envelope["payload"]) == SLASH_FIELDS
    received = acker.requests[0]
    assert (received.type, received.envelope_id) == ("slash_commands", delivery.envelope_id)
    assert received.payload["user_name"] == "alice" and received.payload["team_id"] == "T1"
    assert received.payload["is_enterprise_install"] == "false"
    assert socket_client.frames[0]["type"] == "hello"  # type: ignore[attr-defined]


async def test_concurrent_sends_match_acks_by_envelope_id(
    slack: SlackStandIn, socket_client: SocketModeClient
) -> None:
    texts = [f"cmd{i}" for i in range(5)]
    # Later commands ack first, so acks come back out of order.
    socket_client.socket_mode_request_listeners.append(
        EchoAcker({t: 0.05 * (len(texts) - i) for i, t in enumerate(texts)})
    )
    deliveries = await asyncio.gather(
        *(slack.send_slash_command(command="/sky", text=t) for t in texts)
    )
    assert [d.payload for d in deliveries] == [{"text": f"echo:{t}"} for t in texts]
    ack_order = [a["payload"]["text"] for a in slack.socket.acks.items]
    assert sorted(ack_order) == sorted(d.payload["text"] for d in deliveries if d.payload)
    assert ack_order != [f"echo:{t}" for t in texts]  # they really did come back out of order


async def test_missing_ack_times_out(slack: SlackStandIn, socket_client: SocketModeClient) -> None:
    socket_client.socket_mode_request_listeners.append(EchoAcker(ack=False))
    with pytest.raises(TimeoutError, match="slash_commands"):
        await slack.send_slash_command(command="/sky", text="ignored", timeout=0.3)


async def test_events_api_app_home_opened(
    slack: SlackStandIn, socket_client: SocketModeClient
) -> None:
    acker = EchoAcker()
    socket_client.socket_mode_request_listeners.append(acker)
    delivery = await slack.send_app_home_opened("U1")
    assert delivery.ack == {"envelope_id": delivery.envelope_id}
    assert delivery.envelope["type"] == "events_api"
    assert delivery.envelope["accepts_response_payload"] is False
    event = acker.requests[0].payload["event"]
    assert (event["type"], event["user"], event["tab"]) == ("app_home_opened", "U1", "home")
    assert event["channel"] == slack.dm_channel_for("U1")
    assert acker.requests[0].payload["type"] == "event_callback"


async def test_client_reconnects_after_disconnect_request_and_drop(
    slack: SlackStandIn, socket_client: SocketModeClient
) -> None:
    socket_client.socket_mode_request_listeners.append(EchoAcker())
    await slack.request_reconnect("refresh_requested")
    await slack.wait_for_socket_connection(2)
    assert (await slack.send_slash_command(command="/sky", text="a")).payload == {"text": "echo:a"}

    await slack.drop_socket_connections()
    await slack.wait_for_socket_connection(3)
    assert (await slack.send_slash_command(command="/sky", text="b")).payload == {"text": "echo:b"}
    assert [c.open for c in slack.socket_connections] == [False, False, True]
    assert len(slack.calls_to("apps.connections.open")) == 3


async def test_response_url_posts_are_recorded(
    slack: SlackStandIn, socket_client: SocketModeClient
) -> None:
    socket_client.socket_mode_request_listeners.append(EchoAcker())
    first = await slack.send_slash_command(command="/sky", text="one")
    second = await slack.send_slash_command(command="/sky", text="two")
    assert first.response_url != second.response_url
    assert first.response_url is not None and first.response_url.startswith(slack.root_url)
    sent = await AsyncWebhookClient(first.response_url).send(text="done", response_type="ephemeral")
    assert (sent.status_code, sent.body) == (200, "ok")
    post = await slack.wait_for_response_url_post(url=first.response_url)
    assert post.body["text"] == "done" and post.command is not None
    assert post.command["text"] == "one"
    unknown = await AsyncWebhookClient(slack.root_url + "commands/T/1/nope").send(text="x")
    assert unknown.status_code == 404


# -- HTTP mode signing --------------------------------------------------------------------------


def test_signed_slash_command_matches_slack_sdk_verifier() -> None:
    verifier = SignatureVerifier("s3cret")
    good = signed_slash_command("s3cret", command="/sky", text="status all", user_id="U1")
    assert verifier.is_valid_request(good.body, good.headers)
    assert "text=status+all" in good.body and "command=%2Fsky" in good.body
    wrong = signed_slash_command("s3cret", command="/sky", wrong_secret=True)
    assert not verifier.is_valid_request(wrong.body, wrong.headers)
    stale = signed_slash_command("s3cret", command="/sky", age_seconds=600)
    assert not verifier.is_valid_request(stale.body, stale.headers)


# -- Bolt end to end ---------------------------------------------------------------------------


def _bolt_app(slack: SlackStandIn, signing_secret: str = "s3cret") -> AsyncApp:
    app = AsyncApp(client=slack.web_client(), signing_secret=signing_secret)

    @app.command("/sky")
    async def sky(ack: Any, respond: Any, command: dict[str, Any]) -> None:
        await ack(f"working on {command['text']}")
        await respond(f"done {command['text']}")

    @app.event("app_home_opened")
    async def home(event: dict[str, Any], client: AsyncWebClient) -> None:
        await client.views_publish(user_id=event["user"], view={"type": "home", "blocks": []})

    return app


async def test_bolt_socket_mode_app_end_to_end(slack: SlackStandIn) -> None:
    handler = AsyncSocketModeHandler(_bolt_app(slack), app_token=slack.app_token)
    await handler.connect_async()
    try:
        delivery = await slack.send_slash_command(command="/sky", text="help", user_id="U1")
        assert delivery.payload == {"text": "working on help"}
        post = await slack.wait_for_response_url_post(url=delivery.response_url)
        assert post.body["text"] == "done help"
        await slack.send_app_home_opened("U1")
        publish = await slack.wait_for_call("views.publish")
        assert publish.params["user_id"] == "U1" and "U1" in slack.home_views
    finally:
        await handler.close_async()


async def test_bolt_http_mode_verifies_signatures(slack: SlackStandIn) -> None:
    runner = web.AppRunner(_bolt_app(slack).web_app(path="/slack/events"), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    url = f"http://{host}:{port}/slack/events"
    try:
        async with aiohttp.ClientSession() as session:
            good = slack.signed_slash_command("s3cret", command="/sky", text="gpus", user_id="U1")
            async with session.post(url, data=good.body, headers=good.headers) as resp:
                assert (resp.status, await resp.text()) == (200, "working on gpus")
            post = await slack.wait_for_response_url_post(url=good.payload["response_url"])
            assert post.body["text"] == "done gpus"
            for bad in (
                slack.signed_slash_command("s3cret", command="/sky", wrong_secret=True),
                slack.signed_slash_command("s3cret", command="/sky", age_seconds=600),
            ):
                async with session.post(url, data=bad.body, headers=bad.headers) as resp:
                    assert resp.status == 401
        assert len(slack.response_url_posts) == 1
    finally:
        await runner.cleanup()
