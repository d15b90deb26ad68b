"""A local Slack stand-in for end-to-end tests of skybot.

Real slack_sdk / Bolt clients talk to it over HTTP and websockets on 127.0.0.1, so tests cover
the genuine wire behaviour (auth, retries, Socket Mode acks and reconnects) without Slack.

    async with SlackStandIn(users=[SlackUser("U1", "alice", email="alice@example.org")]) as slack:
        client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
        ...
        delivery = await slack.send_slash_command(command="/sky", text="help", user_id="U1")
        assert delivery.payload == {...}
"""

from .faults import Fault
from .fixtures import slack_standin
from .payloads import (
    app_home_opened_event,
    events_api_envelope,
    slash_command_payload,
    slash_commands_envelope,
)
from .records import Call, ResponseUrlPost, UploadedFile
from .server import SlackStandIn
from .signing import (
    SignedRequest,
    compute_signature,
    signed_block_action,
    signed_headers,
    signed_slash_command,
)
from .socket_mode import Delivery, SocketConnection
from .views import OpenModal, ViewError
from .web_api import SlackError
from .workspace import SlackChannel, SlackUser, Workspace

__all__ = [
    "Call",
    "Delivery",
    "Fault",
    "OpenModal",
    "ResponseUrlPost",
    "SignedRequest",
    "SlackChannel",
    "SlackError",
    "SlackStandIn",
    "SlackUser",
    "SocketConnection",
    "UploadedFile",
    "ViewError",
    "Workspace",
    "app_home_opened_event",
    "compute_signature",
    "events_api_envelope",
    "signed_block_action",
    "signed_headers",
    "signed_slash_command",
    "slack_standin",
    "slash_command_payload",
    "slash_commands_envelope",
]
