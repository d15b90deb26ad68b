"""Building the Bolt app and serving it over Socket Mode or HTTP."""

from __future__ import annotations

import logging

from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Config, Secrets
from handlers import home, slash
from handlers.buttons.registry import register_buttons
from handlers.clusters import ClusterDesks, single_desk
from handlers.job_form import register_form
from handlers.services import Services
from handlers.slash import ObserveCommand
from scheduler.slack_limits import LimitedClient, RetryAfter, SlackLimits
from store.reader import SnapshotCache

log = logging.getLogger(__name__)

DEFAULT_SLACK_API_URL = "https://slack.com/api/"


def web_client(secrets: Secrets, limits: SlackLimits | None = None) -> AsyncWebClient:
    """The Web API client every part of skybot shares: retries 429s (after Retry-After) and
    dropped connections, and keeps Slack's limits (`limits`, shared with the sender's)."""
    limits = limits or SlackLimits()
    return LimitedClient(
        limits=limits,
        token=secrets.bot_token,
        base_url=secrets.api_url or DEFAULT_SLACK_API_URL,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=3),
            RetryAfter(limits, max_retry_count=5),
        ],
    )


def build_app(
    config: Config,
    secrets: Secrets,
    cache: SnapshotCache,
    services: Services,
    client: AsyncWebClient | None = None,
    observe_command: ObserveCommand | None = None,
    desks: ClusterDesks | None = None,
) -> AsyncApp:
    http = config.slack.mode == "http"
    app = AsyncApp(
        client=client or web_client(secrets),
        signing_secret=secrets.signing_secret if http else "unused-in-socket-mode",
        # Bolt's request verification checks HTTP signatures; Socket Mode has none to check.
        request_verification_enabled=http,
        # Answer in the ack itself: the listener runs inline instead of being polled for.
        process_before_response=True,
        # Bolt runs each of its built-in middleware on every request (issue 32). Slack sends
        # ssl_check and url_verification only to a Request URL, so over Socket Mode those
        # two never match; and skybot defines no workflow functions, whose token the last
        # one attaches.
        ssl_check_enabled=http,
        url_verification_enabled=http,
        attaching_function_token_enabled=False,
    )
    slash.register_listeners(app, cache, services, observe=observe_command, desks=desks)
    home.register_listeners(app, cache, services, desks)
    publish_home = home.home_publisher(cache, services, desks)
    register_buttons(app, cache, services, publish_home, desks)
    register_form(app, desks or single_desk(services.config, cache.current, services), services)
    return app


async def serve_http(app: AsyncApp, host: str, port: int) -> web.AppRunner:
    runner = web.AppRunner(app.web_app(path="/slack/events"))
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    log.info("listening for Slack events on http://%s:%d/slack/events", host, port)
    return runner
